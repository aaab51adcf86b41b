"""A tiny random chat model built from a config on the spot: no download, seconds on a CPU.

Why one builder: the agent tests need a real tokenizer, a ChatML template and a causal LM that
TRL accepts, and the learning experiments (``benchmarks/learning``) need the same thing a bit
larger, with a tokenizer trained on their task's words so that an action is one or two tokens.
Both build through :func:`build_tiny_model`; the defaults are the test model (a 2-layer
``Qwen2ForCausalLM`` of width 32 over a 320-token byte-level BPE).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aem_envs.reply import REPLY_FORMAT

#: ChatML, the template Qwen2.5 and SmolLM2 use; ``add_generation_prompt`` opens a reply.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

#: Special tokens: padding, turn start, turn end (the EOS of every reply).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")

#: The default tokenizer corpus: agent-style sentences plus every printable ASCII character.
DEFAULT_CORPUS: tuple[str, ...] = (
    "You are an agent in a text world. Think, then act.",
    REPLY_FORMAT.format("look", "I should look around first."),
    REPLY_FORMAT.format("take key from table", "The key is on the table."),
    "Observation: You are in a kitchen. There is a table, a fridge and a door.",
    "Admissible actions: look, go north, go south, open fridge, take key from table.",
    f"Your task is to put a clean apple in the fridge. Reply with {REPLY_FORMAT.format('...')}.",
    "0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ .,;:!?'\"()[]{}<>/=-_",
)


def build_tiny_model(
    directory: str | Path,
    *,
    vocab_size: int = 320,
    seed: int = 0,
    corpus: Sequence[str] | None = None,
    corpus_repeats: int = 4,
    hidden_size: int = 32,
    intermediate_size: int | None = None,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    max_positions: int = 2048,
    added_tokens: Sequence[str] = (),
) -> Path:
    """Write a byte-level BPE tokenizer (ChatML template) and a random Qwen2 model.

    ``corpus`` (default :data:`DEFAULT_CORPUS`) is what the BPE merges are learnt from:
    words repeated there become single tokens, which is what lets a small random model emit
    a whole action in one or two samples. ``added_tokens`` (e.g. the action tags) are kept
    whole, never split, and decoded as text. Every byte stays encodable whatever the corpus.
    Returns ``directory``, loadable with ``from_pretrained``.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    directory = Path(directory)
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = list(DEFAULT_CORPUS if corpus is None else corpus)
    core.train_from_iterator(texts * corpus_repeats, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
    )
    if added_tokens:
        tokenizer.add_tokens(list(added_tokens))
    tokenizer.chat_template = CHATML_TEMPLATE
    tokenizer.save_pretrained(directory)

    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(directory)
    return directory
