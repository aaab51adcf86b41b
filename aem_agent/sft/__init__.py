"""Expert warm start (``aem sft``): supervised fine-tuning on the envs' own expert episodes."""
