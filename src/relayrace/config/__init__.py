"""Teams defined in YAML: Kubernetes-style documents (``relayrace/v1``, or Astromesh's
``astromesh/v1``) loaded into agents, swarms, teams and workflows.
Layer: an entry point. Builds declarations from YAML; may import the runner and
everything below it.

.. code-block:: python

    from relayrace.config import load_team, to_mermaid

    team = load_team("team/")          # a directory of *.yaml files, or one file
    for warning in team.warnings:      # Astromesh keys relayrace reads but ignores
        print(warning)
    result = await Runner.run(team["supervisor"], "...")
"""

from ._schema import json_schema
from ._validate import ConfigWarning, suggest
from ._yaml import SourceDocument, format_path, read_documents
from .graph import GraphEdge, GraphNode, TeamGraph, agent_graph, to_dot, to_mermaid, write_svg
from .loader import DocumentInfo, LoadedTeam, load_team
from .scripts import load_script

__all__ = [
    "ConfigWarning",
    "DocumentInfo",
    "GraphEdge",
    "GraphNode",
    "LoadedTeam",
    "SourceDocument",
    "TeamGraph",
    "agent_graph",
    "format_path",
    "json_schema",
    "load_script",
    "load_team",
    "read_documents",
    "suggest",
    "to_dot",
    "to_mermaid",
    "write_svg",
]
