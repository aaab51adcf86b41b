"""The AEM GRPO trainer: TRL's GRPOTrainer with turn-level credit, its config and its run."""
