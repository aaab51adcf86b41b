"""``python -m aem_envs.swe.generate [--check]``: regenerate or verify the bundled tasks."""

from __future__ import annotations

import argparse
import sys

from aem_envs.swe.generate.build import build_all, check_shipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m aem_envs.swe.generate", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="verify the shipped tasks instead of writing them"
    )
    args = parser.parse_args(argv)
    if args.check:
        problems = check_shipped()
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    rows = build_all()
    print(f"wrote {len(rows)} instances", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
