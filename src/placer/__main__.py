"""``python -m placer``: the ``placer`` command line."""
from placer.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
