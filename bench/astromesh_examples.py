"""Load Astromesh 0.74.1's own example agents with relayrace and report what is ignored.

    .venv/bin/python bench/astromesh_examples.py            # downloads the sdist with pip
    .venv/bin/python bench/astromesh_examples.py --from DIR # an extracted config/agents dir

The sdist is downloaded into a temporary directory (nothing of Astromesh is kept), its
``config/agents/*.agent.yaml`` files are loaded together with ``relayrace.config.load_team``
(nothing is contacted while loading), and every warning is printed under its file. Exits 1
if the files do not load.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import tempfile
from collections import defaultdict
from pathlib import Path

from relayrace.config import load_team
from relayrace.core.exceptions import ConfigError

VERSION = "0.74.1"


def download(into: Path) -> Path:
    """Astromesh's sdist, fetched by pip, with its example agents extracted: their folder."""
    subprocess.run([sys.executable, "-m", "pip", "download", f"astromesh=={VERSION}",
                    "--no-deps", "--no-binary", ":all:", "--python-version", "3.12",
                    "--only-binary=:none:", "-d", str(into), "-q"], check=True)
    sdist = next(into.glob("astromesh-*.tar.gz"))
    agents = into / "agents"
    agents.mkdir()
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and parts[1:3] == ("config", "agents") \
                    and member.name.endswith(".agent.yaml"):
                source = archive.extractfile(member)
                assert source is not None
                (agents / parts[-1]).write_bytes(source.read())
    return agents


def report(agents: Path) -> int:
    """Print each file's warnings; 0 if the agents load, 1 if not."""
    files = sorted(agents.glob("*.agent.yaml"))
    print(f"Astromesh {VERSION}: {len(files)} example agents in config/agents/")
    try:
        team = load_team(agents)
    except ConfigError as exc:
        print(f"NOT LOADED:\n{exc}")
        return 1
    by_file: dict[str, list[str]] = defaultdict(list)
    for w in team.warnings:
        by_file[Path(w.file).name].append(f"line {w.line}: {w.key}: {w.message}")
    for file in files:
        found = by_file.get(file.name, [])
        print(f"\n{file.name}: {len(found)} warning(s)")
        for line in found:
            print(f"  {line}")
    print(f"\nLoaded: {', '.join(team)}; {len(team.warnings)} warning(s) in all.")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="folder", type=Path,
                        help="a folder of *.agent.yaml files (default: download the sdist)")
    args = parser.parse_args()
    if args.folder is not None:
        return report(args.folder)
    with tempfile.TemporaryDirectory() as tmp:
        return report(download(Path(tmp)))


if __name__ == "__main__":
    sys.exit(main())
