"""The ``aem`` command: the single front door over environments, agent and harness."""
