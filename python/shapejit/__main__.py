"""``python -m shapejit [doctor]``: the doctor report from Python (the ``shapejit`` command-line
tool, installed beside the package, has every subcommand)."""

import sys

from . import doctor


def main(argv: list[str]) -> int:
    if argv not in ([], ["doctor"]):
        print("usage: python -m shapejit [doctor]   (the shapejit tool has every subcommand)",
              file=sys.stderr)
        return 2
    doctor()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
