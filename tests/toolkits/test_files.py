"""file_tools: the honest calls work, and every way out of the root is refused or contained.

The escapes each plant a secret outside the root (`OUTSIDE`) and check that no answer ever
carries it and that nothing outside was changed.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tether import RunContext, Session, create_agent
from tether.errors import ConfigError
from tether.lab import ToolProvider
from tether.testing import collect, script_client
from tether.toolkits import Toolkit, file_tools
from tether.tools import ToolResult
from tether.tracing import Tracer

SECRET = "OUTSIDE-SECRET-7f3a"


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(root, outside): a root with a few files, and a directory beside it holding the secret."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET + "\n")
    (root / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    (root / "src").mkdir()
    (root / "src" / "main.py").write_text("import os\n\nprint('hello')\n")
    (root / "src" / "util.py").write_text("def helper():\n    return 42\n")
    yield root, outside


def ctx() -> RunContext:
    return RunContext("test")


async def call(tk: Toolkit, name: str, args: dict[str, Any]) -> ToolResult:
    return await tk[name].call(args, ctx())


def refused(result: ToolResult) -> bool:
    return result.is_error and SECRET not in result.output


# -- the honest calls -------------------------------------------------------------------------


async def test_read_file_returns_the_text(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    result = await call(file_tools(root), "read_file", {"path": "src/main.py"})
    assert result == ToolResult("import os\n\nprint('hello')\n")


async def test_read_file_gives_a_line_range_and_says_which(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    result = await call(
        file_tools(root), "read_file", {"path": "notes.txt", "start_line": 2, "end_line": 3}
    )
    assert result.output == "beta\ngamma\n[lines 2-3 of notes.txt]"
    past = await call(file_tools(root), "read_file", {"path": "notes.txt", "start_line": 9})
    assert past.output == "[notes.txt has 4 lines; none from line 9]"


async def test_read_file_cuts_at_max_bytes_and_says_where_to_go_on(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {i}\n" for i in range(1000)))
    result = await call(file_tools(tmp_path, max_bytes=20), "read_file", {"path": "big.txt"})
    assert result.output.startswith("line 0\nline 1\nline 2\n")
    assert "[cut at 20 bytes, in line 3; read on with start_line=3]" in result.output
    assert "line 5" not in result.output


async def test_read_file_refuses_binary_files(tmp_path: Path) -> None:
    (tmp_path / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    tk = file_tools(tmp_path)
    for name in ("image.png", "latin1.txt"):
        result = await call(tk, "read_file", {"path": name})
        assert result.is_error and "binary file" in result.output


async def test_list_dir_glob_and_grep(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tk = file_tools(root)
    listing = await call(tk, "list_dir", {})
    assert listing.output == "notes.txt\t23 bytes\nsrc/"
    found = await call(tk, "glob", {"pattern": "**/*.py"})
    assert found.output == "src/main.py\nsrc/util.py"
    assert (await call(tk, "glob", {"pattern": "*.txt"})).output == "notes.txt"
    hits = await call(tk, "grep", {"pattern": r"^\s*return", "path": "src"})
    assert hits.output == "src/util.py:2:     return 42"
    only_py = await call(tk, "grep", {"pattern": "A", "ignore_case": True, "glob": "**/*.txt"})
    assert (
        only_py.output
        == "notes.txt:1: alpha\nnotes.txt:2: beta\nnotes.txt:3: gamma\nnotes.txt:4: delta"
    )
    one_file = await call(tk, "grep", {"pattern": "print", "path": "src/main.py"})
    assert one_file.output == "src/main.py:3: print('hello')"


async def test_grep_stops_a_runaway_pattern_at_its_time_bound(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("a" * 40 + "b\n")
    started = time.monotonic()
    result = await call(file_tools(tmp_path, grep_timeout=0.5), "grep", {"pattern": "^(a+)+$"})
    assert time.monotonic() - started < 10
    assert not result.is_error
    assert "grep stopped after 0.5s" in result.output


async def test_grep_refuses_a_pattern_that_is_not_a_regex(tmp_path: Path) -> None:
    result = await call(file_tools(tmp_path), "grep", {"pattern": "(unclosed"})
    assert result.is_error and "not a valid regular expression" in result.output


async def test_the_writers_exist_only_with_write_true(tmp_path: Path) -> None:
    assert [t.name for t in file_tools(tmp_path)] == ["read_file", "list_dir", "glob", "grep"]
    assert [t.name for t in file_tools(tmp_path, write=True)][4:] == [
        "write_file",
        "edit_file",
        "delete_file",
    ]


async def test_write_edit_and_delete(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tk = file_tools(root, write=True)
    made = await call(tk, "write_file", {"path": "docs/new/readme.md", "content": "# Hi\n"})
    assert made.output == "created docs/new/readme.md (5 bytes)"
    assert (root / "docs/new/readme.md").read_text() == "# Hi\n"
    os.chmod(root / "src/util.py", 0o755)
    edited = await call(
        tk, "edit_file", {"path": "src/util.py", "old_string": "42", "new_string": "43"}
    )
    assert edited.output == "edited src/util.py at line 2"
    assert (root / "src/util.py").read_text() == "def helper():\n    return 43\n"
    assert stat.S_IMODE((root / "src/util.py").stat().st_mode) == 0o755  # the mode is kept
    assert (await call(tk, "delete_file", {"path": "notes.txt"})).output == "deleted notes.txt"
    assert not (root / "notes.txt").exists()
    assert sorted(p.name for p in root.iterdir()) == ["docs", "src"]  # no temporary left


async def test_edit_file_refuses_a_missing_or_ambiguous_match(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tk = file_tools(root, write=True)
    missing = await call(
        tk, "edit_file", {"path": "notes.txt", "old_string": "omega", "new_string": "x"}
    )
    assert missing.is_error and "was not found" in missing.output
    many = await call(
        tk, "edit_file", {"path": "notes.txt", "old_string": "a\n", "new_string": "x"}
    )
    assert many.is_error and "appears 4 times" in many.output
    assert (root / "notes.txt").read_text() == "alpha\nbeta\ngamma\ndelta\n"


async def test_write_file_refuses_content_over_max_bytes(tmp_path: Path) -> None:
    result = await call(
        file_tools(tmp_path, write=True, max_bytes=10),
        "write_file",
        {"path": "a", "content": "x" * 11},
    )
    assert result.is_error and "takes 10 at most" in result.output
    assert not (tmp_path / "a").exists()


def test_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a directory"):
        file_tools(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match="max_bytes"):
        file_tools(tmp_path, max_bytes=0)
    with pytest.raises(ConfigError, match="grep_timeout"):
        file_tools(tmp_path, grep_timeout=-1)


async def test_the_root_can_come_from_the_run(sandbox: tuple[Path, Path], tmp_path: Path) -> None:
    root, _ = sandbox
    tk = file_tools(lambda ctx: ctx.services["workspace"])
    run = RunContext("scope-1", services={"workspace": str(root)})
    assert (await tk["read_file"].call({"path": "notes.txt"}, run)).output.startswith("alpha")
    # the lab's memory scope is the session id: one workspace per scope
    (tmp_path / "scope-1").mkdir()
    (tmp_path / "scope-1" / "mine.txt").write_text("scope one")
    per_scope = file_tools(lambda ctx: tmp_path / ctx.session_id)
    assert (await per_scope["read_file"].call({"path": "mine.txt"}, run)).output == "scope one"


async def test_a_toolkit_is_a_tool_provider_and_adds_up(tmp_path: Path) -> None:
    tk = file_tools(tmp_path)
    assert isinstance(tk, ToolProvider)
    assert [t.name for t in tk.get_tools(None)] == ["read_file", "list_dir", "glob", "grep"]
    both = tk + file_tools(tmp_path, prefix="other_")
    assert len(both) == 8 and both["other_grep"].name == "other_grep"
    with pytest.raises(ConfigError, match="two tools of one name"):
        tk + tk


async def test_an_agent_calls_them_and_each_call_is_traced(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    records: list[Any] = []
    client = script_client(
        [
            {"tool_use": [{"name": "read_file", "input": {"path": "notes.txt", "end_line": 1}}]},
            {"tool_use": [{"name": "read_file", "input": {"path": "../outside/secret.txt"}}]},
            {"text": "done"},
        ]
    )
    agent = create_agent(llm=client, tools=[*file_tools(root)], trace=records.append)
    events = await collect(agent, Session(), "read the notes")
    results = [e for e in events if e["type"] == "tool_result"]
    assert [r.get("is_error", False) for r in results] == [False, True]
    file_records = [r for r in records if r["phase"] == "tool" and r["name"].startswith("file:")]
    assert [r["name"] for r in file_records] == ["file:read", "file:read:refused"]
    assert file_records[0]["data"] == {"path": "notes.txt", "bytes": 6, "size": 23}
    assert "leads outside the root" in file_records[1]["data"]["reason"]
    streamed = [e["record"]["name"] for e in events if e["type"] == "trace"]
    assert "file:read" in streamed and "file:read:refused" in streamed


async def test_tracing_is_quiet_when_off_and_goes_to_the_tracer_when_on(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x")
    seen: list[Any] = []
    traced = RunContext("s", _tracer=Tracer(seen.append))
    await file_tools(tmp_path)["read_file"].call({"path": "a.txt"}, traced)
    assert [r["name"] for r in seen] == ["file:read"]


# -- path escapes ----------------------------------------------------------------------------

ESCAPES_BY_NAME = [
    "../outside/secret.txt",
    "../../../../../../../../etc/passwd",
    "src/../../outside/secret.txt",
    "./../outside/secret.txt",
    "src/./../../outside/secret.txt",
    "/etc/passwd",
    "//etc/passwd",
    "~/.ssh/id_rsa",
    "~root/.bashrc",
    "..\\outside\\secret.txt",
    "src\\..\\..\\outside\\secret.txt",
    "C:\\Windows\\System32\\drivers\\etc\\hosts",
    "notes.txt\x00../../outside/secret.txt",
    "/proc/self/root/etc/passwd",
    "/proc/self/cwd/../outside/secret.txt",
    "/dev/zero",
    "a/" * 2100 + "x",
    "x" * 300,
    "",
]


@pytest.mark.parametrize("path", ESCAPES_BY_NAME, ids=lambda p: repr(p)[:40])
@pytest.mark.parametrize(
    "tool", ["read_file", "write_file", "edit_file", "delete_file", "list_dir"]
)
async def test_a_path_that_leaves_the_root_is_refused_by_every_tool(
    sandbox: tuple[Path, Path], path: str, tool: str
) -> None:
    root, outside = sandbox
    tk = file_tools(root, write=True)
    args: dict[str, Any] = {"path": path}
    if tool == "write_file":
        args["content"] = "pwned"
    if tool == "edit_file":
        args |= {"old_string": SECRET, "new_string": "pwned"}
    result = await call(tk, tool, args)
    if tool == "list_dir" and path == "":
        assert not result.is_error  # '' is the root itself, for list_dir
    else:
        assert refused(result), result
    assert (outside / "secret.txt").read_text() == SECRET + "\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


@pytest.mark.parametrize(
    "path", ["%2e%2e/outside/secret.txt", "..%2foutside%2fsecret.txt", "%2E%2E%2Foutside"]
)
async def test_percent_encoded_traversal_is_a_plain_name_inside_the_root(
    sandbox: tuple[Path, Path], path: str
) -> None:
    # Paths are not URLs: '%2e%2e' is a three-character name, looked up inside the root.
    root, _ = sandbox
    result = await call(file_tools(root), "read_file", {"path": path})
    assert refused(result) and "does not exist" in result.output


async def test_a_symlink_to_a_file_outside_is_refused(sandbox: tuple[Path, Path]) -> None:
    root, outside = sandbox
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "rel.txt").symlink_to("../outside/secret.txt")
    (root / "src" / "deep.txt").symlink_to("../../outside/secret.txt")
    (root / "src" / "round.txt").symlink_to("../../root/notes.txt")  # out, then back in: out
    tk = file_tools(root, write=True)
    for name in ("link.txt", "rel.txt", "src/deep.txt", "src/round.txt"):
        assert refused(await call(tk, "read_file", {"path": name}))
        edit = {"path": name, "old_string": "OUTSIDE", "new_string": "pwned"}
        assert refused(await call(tk, "edit_file", edit))
        assert refused(await call(tk, "write_file", {"path": name, "content": "pwned"}))
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


async def test_a_symlinked_directory_is_not_entered(sandbox: tuple[Path, Path]) -> None:
    root, outside = sandbox
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "etc").symlink_to("/etc", target_is_directory=True)
    tk = file_tools(root, write=True)
    assert refused(await call(tk, "read_file", {"path": "out/secret.txt"}))
    assert refused(await call(tk, "list_dir", {"path": "out"}))
    assert refused(await call(tk, "read_file", {"path": "etc/passwd"}))
    assert refused(await call(tk, "write_file", {"path": "out/new.txt", "content": "pwned"}))
    assert refused(await call(tk, "delete_file", {"path": "out/secret.txt"}))
    assert (
        await call(tk, "glob", {"pattern": "**/secret.txt"})
    ).output == "no path matches '**/secret.txt'"
    assert (
        await call(tk, "glob", {"pattern": "**/passwd"})
    ).output == "no path matches '**/passwd'"
    grep = await call(tk, "grep", {"pattern": "OUTSIDE|root:"})
    assert grep.output == "no line matches 'OUTSIDE|root:'"
    assert refused(await call(tk, "grep", {"pattern": "x", "path": "out"}))
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


async def test_a_chain_of_links_inside_the_root_that_ends_outside_is_refused(
    sandbox: tuple[Path, Path],
) -> None:
    root, outside = sandbox
    (root / "hop2").symlink_to(outside / "secret.txt")
    (root / "hop1").symlink_to("hop2")
    assert refused(await call(file_tools(root), "read_file", {"path": "hop1"}))


async def test_a_link_to_proc_self_root_is_refused(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "proc").symlink_to("/proc/self/root", target_is_directory=True)
    assert refused(await call(file_tools(root), "read_file", {"path": "proc/etc/passwd"}))
    assert refused(await call(file_tools(root), "list_dir", {"path": "proc"}))


async def test_a_hard_link_to_a_file_outside_is_not_read_nor_written_through(
    sandbox: tuple[Path, Path],
) -> None:
    root, outside = sandbox
    os.link(outside / "secret.txt", root / "hard.txt")
    tk = file_tools(root, write=True)
    read = await call(tk, "read_file", {"path": "hard.txt"})
    assert refused(read) and "hard links" in read.output
    assert refused(
        await call(
            tk, "edit_file", {"path": "hard.txt", "old_string": "OUTSIDE", "new_string": "x"}
        )
    )
    grep = await call(tk, "grep", {"pattern": "OUTSIDE"})
    assert grep.output.startswith("no line matches 'OUTSIDE'\n[1 files not searched")
    # a write replaces the root's entry; the file outside keeps its content
    written = await call(tk, "write_file", {"path": "hard.txt", "content": "mine"})
    assert not written.is_error
    assert (root / "hard.txt").read_text() == "mine"
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


async def test_a_fifo_is_refused_without_blocking(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    os.mkfifo(root / "pipe")
    tk = file_tools(root, write=True)
    result = await call(tk, "read_file", {"path": "pipe"})
    assert result.is_error and "fifo" in result.output
    assert (await call(tk, "write_file", {"path": "pipe", "content": "x"})).is_error
    assert "(fifo)" in (await call(tk, "list_dir", {})).output


async def test_a_device_file_is_refused(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "zero").symlink_to("/dev/zero")
    assert refused(await call(file_tools(root), "read_file", {"path": "zero"}))
    try:
        os.mknod(root / "null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD, which this test process lacks")
    result = await call(file_tools(root), "read_file", {"path": "null"})
    assert result.is_error and "device" in result.output


async def test_a_symlink_swapped_in_during_the_walk_never_leads_out(
    sandbox: tuple[Path, Path],
) -> None:
    """The time-of-check/time-of-use race: a thread keeps replacing the directory `box` with a
    link to the outside while the tool reads `box/secret.txt`. Each read either sees the
    inside file or is refused; none ever returns the outside one."""
    root, outside = sandbox
    real = root / "box-real"
    real.mkdir()
    (real / "secret.txt").write_text("inside\n")
    link = root / "box-link"
    link.symlink_to(outside, target_is_directory=True)
    box = root / "box"
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            os.rename(real, box)
            os.rename(box, real)
            os.rename(link, box)
            os.rename(box, link)

    thread = threading.Thread(target=swap)
    thread.start()
    outcomes = {"inside": 0, "refused": 0}
    tk = file_tools(root)
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and (outcomes["inside"] < 20 or outcomes["refused"] < 20):
            result = await call(tk, "read_file", {"path": "box/secret.txt"})
            assert SECRET not in result.output
            outcomes["refused" if result.is_error else "inside"] += 1
            if not result.is_error:
                assert result.output == "inside\n"
    finally:
        stop.set()
        thread.join()
    assert outcomes["inside"] > 0 and outcomes["refused"] > 0, outcomes  # the race did happen


async def test_glob_and_grep_obey_the_path_rules(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    tk = file_tools(root)
    assert refused(await call(tk, "glob", {"pattern": "../outside/*"}))
    assert refused(await call(tk, "glob", {"pattern": "/etc/*"}))
    assert refused(await call(tk, "glob", {"pattern": "*", "path": ".."}))
    assert refused(await call(tk, "grep", {"pattern": "OUTSIDE", "path": "../outside"}))
    assert refused(await call(tk, "grep", {"pattern": "OUTSIDE", "path": "/etc"}))
    assert refused(await call(tk, "grep", {"pattern": "OUTSIDE", "glob": "../**"}))


async def test_deleting_a_link_removes_the_link_not_its_target(sandbox: tuple[Path, Path]) -> None:
    root, outside = sandbox
    (root / "link.txt").symlink_to(outside / "secret.txt")
    result = await call(file_tools(root, write=True), "delete_file", {"path": "link.txt"})
    assert result.output == "deleted link.txt"
    assert not (root / "link.txt").is_symlink()
    assert (outside / "secret.txt").read_text() == SECRET + "\n"


async def test_a_root_that_is_itself_a_link_is_the_callers_choice(
    sandbox: tuple[Path, Path], tmp_path: Path
) -> None:
    root, _ = sandbox
    alias = tmp_path / "alias"
    alias.symlink_to(root, target_is_directory=True)
    assert (await call(file_tools(alias), "read_file", {"path": "notes.txt"})).output.startswith(
        "alpha"
    )


async def test_a_line_of_megabytes_is_read_in_bounded_pieces(tmp_path: Path) -> None:
    (tmp_path / "one-line.txt").write_text("y" * 5_000_000)
    result = await call(file_tools(tmp_path, max_bytes=100), "read_file", {"path": "one-line.txt"})
    assert result.output == "y" * 100 + "\n[cut at 100 bytes, in line 1; read on with start_line=1]"


async def test_a_start_line_far_into_a_huge_file_is_refused_not_scanned_forever(
    tmp_path: Path,
) -> None:
    (tmp_path / "log.txt").write_text("line\n" * 100_000)  # 500 KB
    tk = file_tools(tmp_path, max_bytes=1000)  # scans at most 256 KB for the start line
    far = await call(tk, "read_file", {"path": "log.txt", "start_line": 90_000})
    assert far.is_error and "use grep" in far.output
    near = await call(
        tk, "read_file", {"path": "log.txt", "start_line": 40_000, "end_line": 40_001}
    )
    assert near.output == "line\nline\n[lines 40000-40001 of log.txt]"


async def test_grep_says_how_many_files_it_did_not_search(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("needle\n")
    (tmp_path / "b.bin").write_bytes(b"needle\x00\x01")
    (tmp_path / "big.txt").write_text("needle\n" * 2000)
    result = await call(file_tools(tmp_path, max_bytes=1000), "grep", {"pattern": "needle"})
    assert result.output.splitlines()[0] == "a.txt:1: needle"
    assert result.output.endswith(
        "[2 files not searched: binary, larger than 8000 bytes, linked or unreadable]"
    )


async def test_links_and_dot_dot_that_stay_inside_the_root_work(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# Guide\n")
    (root / "README.md").symlink_to("docs/guide.md")
    (root / "lib").symlink_to("src", target_is_directory=True)
    (root / "docs" / "up").symlink_to("../notes.txt")
    (root / "docs" / "hop").symlink_to("up")
    tk = file_tools(root, write=True)
    assert (await call(tk, "read_file", {"path": "README.md"})).output == "# Guide\n"
    assert (await call(tk, "read_file", {"path": "lib/util.py"})).output.startswith("def helper")
    assert (await call(tk, "read_file", {"path": "docs/hop"})).output.startswith("alpha")
    assert (await call(tk, "read_file", {"path": "src/../notes.txt"})).output.startswith("alpha")
    assert (await call(tk, "list_dir", {"path": "lib"})).output.startswith("main.py")
    assert (
        await call(tk, "grep", {"pattern": "Guide", "path": "README.md"})
    ).output == "README.md:1: # Guide"
    # writing through a link changes its target; deleting a link removes only the link
    edit = {"path": "README.md", "old_string": "Guide", "new_string": "Handbook"}
    assert not (await call(tk, "edit_file", edit)).is_error
    assert (root / "docs" / "guide.md").read_text() == "# Handbook\n"
    assert (root / "README.md").is_symlink()
    assert not (await call(tk, "write_file", {"path": "lib/new.py", "content": "x = 1\n"})).is_error
    assert (root / "src" / "new.py").read_text() == "x = 1\n"
    assert not (await call(tk, "delete_file", {"path": "lib"})).is_error
    assert not (root / "lib").exists() and (root / "src" / "util.py").exists()


async def test_a_link_to_an_absolute_path_is_refused_even_inside_the_root(
    sandbox: tuple[Path, Path],
) -> None:
    root, _ = sandbox
    (root / "abs").symlink_to(root / "notes.txt")
    result = await call(file_tools(root), "read_file", {"path": "abs"})
    assert result.is_error and "absolute path" in result.output


async def test_a_loop_of_links_is_refused(sandbox: tuple[Path, Path]) -> None:
    root, _ = sandbox
    (root / "a").symlink_to("b")
    (root / "b").symlink_to("a")
    (root / "dir-a").symlink_to("dir-b/x", target_is_directory=True)
    (root / "dir-b").symlink_to("dir-a", target_is_directory=True)
    tk = file_tools(root)
    assert "more than 40 symbolic links" in (await call(tk, "read_file", {"path": "a"})).output
    assert "more than 40 symbolic links" in (await call(tk, "list_dir", {"path": "dir-a"})).output
