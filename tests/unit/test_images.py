"""Images install the project from its own pyproject (extras), never a hand-kept dependency list: the
gateway image's own list had drifted to `celery>=5.3` while pyproject says `celery>=5.5,<5.7`."""

from __future__ import annotations

import re
from pathlib import Path

DOCKER = Path(__file__).parents[2] / "docker"
ALLOWED = [
    re.compile(r'pip install "/src\[(server|worker)\]"'),  # the project, with an extra of pyproject's
    re.compile(r'pip install --index-url "\$\{TORCH_INDEX_URL\}" "torch==\$\{TORCH_VERSION\}"'),  # CUDA build
]


def test_every_pip_install_in_an_image_is_the_project_or_its_torch_build() -> None:
    installs = [
        (path.name, line.strip())
        for path in sorted(DOCKER.glob("Dockerfile.*"))
        for line in path.read_text().splitlines()
        if "pip install" in line and not line.lstrip().startswith("#")
    ]
    assert len(installs) >= 3
    for name, line in installs:
        assert any(rule.search(line) for rule in ALLOWED), (name, line)
