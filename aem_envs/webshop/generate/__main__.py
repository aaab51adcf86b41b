"""``python -m aem_envs.webshop.generate``: write a generated catalog into a folder."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from aem_envs.webshop.generate.build import (
    BUNDLED_GOALS,
    BUNDLED_PRODUCTS,
    BUNDLED_SEED,
    write_catalog,
)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m aem_envs.webshop.generate",
        description="Write a generated WebShop catalog in the original file formats.",
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--products", type=int, default=BUNDLED_PRODUCTS)
    parser.add_argument("--goals", type=int, default=BUNDLED_GOALS)
    parser.add_argument("--seed", type=int, default=BUNDLED_SEED)
    parser.add_argument("--no-compress", action="store_true", help="write plain .json files")
    args = parser.parse_args(argv)
    if not 0 <= args.goals <= args.products:
        parser.error("--goals must be between 0 and --products")
    write_catalog(args.products, args.goals, args.seed, args.out, compress=not args.no_compress)


if __name__ == "__main__":
    main()
