"""The aem reference agent: policies, prompts, multi-turn rollouts and the AEM GRPO trainer."""
