"""Other processes, both ways: MCP servers as toolsets and remote A2A agents (clients,
declarations), and a team served over MCP and A2A (servers, entry points).
The clients import `agents` and below (not `teams`); the servers may import the runner.
"""
