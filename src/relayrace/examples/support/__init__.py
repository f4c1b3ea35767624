"""The customer-support team (`team`), its scripted offline conversation (`script`) and the
demo that plays it (`demo`, what ``relayrace demo`` and ``python3 dev demo`` run)."""
