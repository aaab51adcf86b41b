"""Performance measurements of the envs and the AEM trainer, gathered by ``aem bench perf``."""
