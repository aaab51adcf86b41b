"""Multi-turn rollouts: episodes played by a policy, recorded as the token ids it trained on."""
