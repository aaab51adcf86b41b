"""The agent's models: bundled checkpoints, the small agent, and tiny test models."""
