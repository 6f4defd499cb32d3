"""A huge label value, through any edge (`--labels`, `--labels-file`, a registration over the bus), is refused
with an error of a few hundred characters at most, and changes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.cli.__main__ import main
from services.client import Client
from services.core.errors import RejectedError
from services.local.mesh import Mesh

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TEN_MB = "a" * 10_000_000
ALMOST_1_MIB = "a" * 1_000_000
"""A value in a `--labels-file` still under the file's size limit (so the label rule refuses it)."""


def refusal(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line `corral argv` (run in this process) prints when it refuses."""
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse refuses a bad --labels
        status = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert status != 0, err[:300]
    return err.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("--labels", "value 'aaaa"),
        ("--labels-file of 10 MB", "10000004 bytes, over the 1048576-byte limit"),
        ("--labels-file of 1 MB", "(1000000 chars)"),
    ],
)
def test_a_huge_label_value_on_the_command_line_gives_a_short_error(
    mesh: Mesh, tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str, said: str
) -> None:
    argv = ["node", "start", "n1", "--resources", "CPU=1", "--nats-url", mesh.nats_url]
    if how == "--labels":
        argv += ["--labels", f"k={TEN_MB}"]
    else:
        path = tmp_path / "labels.yaml"
        path.write_text(f"k: {TEN_MB if '10 MB' in how else ALMOST_1_MIB}\n")
        argv += ["--labels-file", str(path)]
    line = refusal(argv, capsys).replace(str(tmp_path), "")  # the file's name is the user's
    print(f"{how}: {len(line)} characters")
    assert said in line and len(line) < 300, line[:400]


async def test_a_huge_label_value_in_a_registration_is_refused_with_a_short_error(client: Client) -> None:
    with pytest.raises(RejectedError) as refused:
        await client.register_node("n1", {"CPU": 1}, {"k": ALMOST_1_MIB[:200_000]})  # under the message limit
    print(f"registration refused in {len(str(refused.value))} characters")
    assert "(200000 chars)" in str(refused.value) and len(str(refused.value)) < 300
    assert [node.node_id for node in await client.nodes()] == []
