"""What a new user and an on-call operator run into, through the real ``dsh`` CLI in a
subprocess, from directories of the test's choosing, with real files. One test (or a few) per
numbered item of the issue; the wheel install is in ``test_wheel_install.py``."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from dsh_github_reviewer.testing import SandboxGitHub
from tests.cli_kit import PAT, dsh, one_line_error, reviewer_toml, write_pem

pytestmark = pytest.mark.slow
KEYS = {"GITHUB_TOKEN": PAT, "DEEPSEEK_API_KEY": "sk-test-operator"}


# -- 1: installed plugins' commands need no config; the ones that do name the file -------------

def test_plugin_commands_exist_without_a_config(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = dsh("github-reviewer", "--help", cwd=empty)
    assert proc.returncode == 0, proc.stderr
    assert "status" in proc.stdout and "demo" in proc.stdout
    err = one_line_error(dsh("github-reviewer", "status", cwd=empty))
    assert f"none was found at {empty / 'dsh.toml'}" in err and "--config" in err
    # Printing a new web token needs no deployment either; serving the UI does.
    proc = dsh("web", "--generate-token", cwd=empty)
    assert proc.returncode == 0 and len(proc.stdout.strip()) >= 32, proc.stderr
    assert "needs a config file" in one_line_error(dsh("web", cwd=empty))
    assert list(empty.iterdir()) == []


def test_output_piped_into_a_reader_that_stops_is_no_error(tmp_path):
    """`dsh plugins | head -3`: the reader closing the pipe is the user's choice, not a
    failure to report as "dsh: [Errno 32] Broken pipe"."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DSH_DISABLE_PLUGINS",)}
    for args in (["plugins"], ["github-reviewer", "eval", "--check-cases"]):
        proc = subprocess.Popen([sys.executable, "-m", "dsh_harness.cli", *args], cwd=tmp_path,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()                      # the reader is gone before the first write
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141 and err == "", (args, err)


def test_the_demo_runs_from_an_empty_directory_without_a_warning(tmp_path):
    proc = dsh("github-reviewer", "demo", cwd=tmp_path, timeout=180)
    if proc.returncode == 1 and "port 80" in proc.stderr:
        pytest.skip(proc.stderr.strip())
    assert proc.returncode == 0, proc.stderr
    assert "turn flow" in proc.stdout and "Reply to /bot" in proc.stdout
    assert "WARNING" not in proc.stderr and "no price" not in proc.stderr, proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_broken_config_does_not_hide_commands_that_need_none(tmp_path):
    (tmp_path / "dsh.toml").write_text("[storage]\nbakend = 'x'\n")
    proc = dsh("github-reviewer", "demo", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "needs no config" in proc.stdout
    proc = dsh("web", "--generate-token", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    err = one_line_error(dsh("github-reviewer", "status", cwd=tmp_path))
    assert "dsh.toml: storage.bakend: Extra inputs are not permitted" in err


def test_status_names_a_config_that_does_not_enable_the_plugin(tmp_path):
    (tmp_path / "dsh.toml").write_text('home = "state"\n')
    err = one_line_error(dsh("github-reviewer", "status", cwd=tmp_path))
    assert "dsh.toml: no enabled instance of dsh-github-reviewer" in err


# -- 2: dsh run without a config says so and exits non-zero ------------------------------------

def test_run_without_a_config_exits_1_and_creates_nothing(tmp_path):
    err = one_line_error(dsh("run", cwd=tmp_path, env=KEYS, timeout=30))
    assert f"dsh run needs a config file and none was found at {tmp_path / 'dsh.toml'}" in err
    assert list(tmp_path.iterdir()) == []
    err = one_line_error(dsh("--config", "elsewhere.toml", "run", cwd=tmp_path, timeout=30))
    assert "elsewhere.toml: config file not found" in err


def test_run_with_nothing_enabled_exits_1(tmp_path):
    (tmp_path / "dsh.toml").write_text('home = "state"\n')
    err = one_line_error(dsh("run", cwd=tmp_path, timeout=30))
    assert "nothing to run: no plugin instance is enabled" in err


# -- 4: relative paths are relative to the config file, not to the current directory -----------

def test_relative_key_and_mcp_cwd_resolve_against_the_config_file(tmp_path):
    conf = tmp_path / "etc" / "dsh"
    write_pem(conf / "keys" / "app.pem")
    (conf / "mcp-work").mkdir()
    account = ('app_id = 1\ninstallation_id = 2\nprivate_key_path = "keys/app.pem"\n'
               'mcp = { cwd = "mcp-work" }\n')
    (conf / "dsh.toml").write_text(reviewer_toml(account=account))
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    proc = dsh("--config", str(conf / "dsh.toml"), "config", "check", cwd=elsewhere, env=KEYS)
    assert proc.returncode == 0, proc.stderr
    (conf / "mcp-work").rmdir()
    err = one_line_error(dsh("--config", str(conf / "dsh.toml"), "config", "check",
                             cwd=elsewhere, env=KEYS))
    assert f"mcp.cwd: {conf / 'mcp-work'} is not a directory" in err


# -- 5: expected failures are one clear line and a non-zero exit --------------------------------

def test_app_key_error_is_one_line_for_check_and_run(tmp_path):
    (tmp_path / "not-a-key.pem").write_text("hello\n")
    account = 'app_id = 1\ninstallation_id = 2\nprivate_key_path = "not-a-key.pem"\n'
    (tmp_path / "dsh.toml").write_text(reviewer_toml(account=account))
    for command in (["config", "check"], ["run", "--once"]):
        err = one_line_error(dsh(*command, cwd=tmp_path, env=KEYS))
        assert "accounts[main].private_key_path: GitHub App private key" in err
        assert "is not an unencrypted PEM private key" in err


def test_web_port_out_of_range_and_busy_port(tmp_path):
    (tmp_path / "dsh.toml").write_text('home = "state"\n[web]\nenabled = true\n')
    err = one_line_error(dsh("web", "--port", "99999", cwd=tmp_path))
    assert "--port: Input should be less than or equal to 65535" in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = one_line_error(dsh("web", "--port", str(port), cwd=tmp_path, timeout=30))
        assert f"web UI cannot listen on 127.0.0.1:{port}" in err
        # dsh run with [web] enabled on the busy port: exits, instead of hanging unpolled.
        (tmp_path / "dsh.toml").write_text(
            f'home = "state"\n[web]\nenabled = true\nport = {port}\n')
        err = one_line_error(dsh("run", cwd=tmp_path, timeout=30))
        assert f"web UI cannot listen on 127.0.0.1:{port}" in err
        # The webhook receiver's own listener on the busy port: the same, one line. (A
        # reachable GitHub: the account learns its own login before anything listens.)
        webhook = (f'\n[plugins.github-reviewer.webhook]\nenabled = true\nsecret = "s"\n'
                   f'port = {port}\n')
        with SandboxGitHub() as sb:
            sb.add_token("bot", PAT)
            (tmp_path / "dsh.toml").write_text(reviewer_toml(
                account=f'personal_access_token = "{PAT}"\napi_url = "{sb.api_url}"\n'
                        'repositories = ["acme/shop"]', extra_blocks=webhook))
            err = one_line_error(dsh("run", cwd=tmp_path, env=KEYS, timeout=60))
        assert f"webhook receiver cannot listen on 127.0.0.1:{port}" in err


def test_run_without_the_bots_identity_says_so_in_one_line(tmp_path):
    """An account whose own login GitHub cannot tell (and that never learned it)
    does not start: one line naming the account, never a fallback that trusts markers."""
    (tmp_path / "dsh.toml").write_text(reviewer_toml(
        account=f'personal_access_token = "{PAT}"\napi_url = "http://127.0.0.1:9"\n'
                'repositories = ["acme/shop"]'))
    err = one_line_error(dsh("run", cwd=tmp_path, env=KEYS, timeout=60))
    assert "accounts[main]: cannot learn the bot's own GitHub login" in err
    assert PAT not in err


# -- 6: config check rejects what run rejects (one validation) ---------------------------------

SECOND_INSTANCE = ('\n[plugins.second]\nplugin = "dsh-github-reviewer"\n\n'
                   '[[plugins.second.accounts]]\nname = "main"\n'
                   'personal_access_token = "${GITHUB_TOKEN}"\n')
CASES = {
    "same account in two instances": (reviewer_toml(extra_blocks=SECOND_INSTANCE),
                                      "account 'main' is also configured by another instance"),
    "unknown default_model provider": (reviewer_toml(top='default_model = "nope/m"'),
                                       "default_model: provider 'nope' is not defined"),
    "bad sessions.store": (reviewer_toml(top='[sessions]\nstore = "mongo"'),
                           "sessions.store: unknown session store 'mongo'"),
    "public web host without token": (
        reviewer_toml(top='[web]\nenabled = true\nhost = "0.0.0.0"'),
        "web.host '0.0.0.0' is not a loopback address: set web.auth_token"),
    "missing App key file": (
        reviewer_toml(account='app_id = 1\ninstallation_id = 2\nprivate_key_path = "gone.pem"'),
        "private_key_path: cannot read GitHub App private key"),
    "missing credentials": (reviewer_toml(account='personal_access_token = "${NO_SUCH_VAR:-}"'),
                            "no GitHub credentials for github-reviewer.accounts[main]"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_check_rejects_what_run_rejects(tmp_path, case):
    toml, message = CASES[case]
    (tmp_path / "dsh.toml").write_text(toml)
    check = one_line_error(dsh("config", "check", cwd=tmp_path, env=KEYS))
    run = one_line_error(dsh("run", "--once", cwd=tmp_path, env=KEYS))
    assert message in check and message in run
    assert check == run, "check and run share one validation"


# -- 7: storage copy never silently replaces a live destination ---------------------------------

def test_storage_copy_refuses_to_replace_then_backs_up(tmp_path, sandbox80_shop):
    config = sandbox80_shop  # a real reviewer deployment that reviewed a PR (sqlite backend)
    cwd = config.parent
    listing = json.loads(dsh("--config", str(config), "storage", "ls", "--json", cwd=cwd).stdout)
    held = sum(listing[0]["tables"].values())
    assert held > 0
    # An empty json source would have wiped the live sqlite records.
    err = one_line_error(dsh("--config", str(config), "storage", "copy", "dsh_github_reviewer",
                             "--from", "json", "--to", "sqlite", cwd=cwd))
    assert f"sqlite already holds {held} records" in err and "--force" in err
    after = json.loads(dsh("--config", str(config), "storage", "ls", "--json", cwd=cwd).stdout)
    assert after == listing
    # Into an empty destination: no --force needed, no backup.
    proc = dsh("--config", str(config), "storage", "copy", "dsh_github_reviewer",
               "--from", "sqlite", "--to", "json", cwd=cwd)
    assert proc.returncode == 0 and "backed up" not in proc.stdout
    # --force replaces, after writing what it replaces to a backup file.
    proc = dsh("--config", str(config), "storage", "copy", "dsh_github_reviewer",
               "--from", "sqlite", "--to", "json", "--force", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    backup = Path(proc.stdout.split("backed up the replaced json records to ")[1].split("\n")[0])
    saved = json.loads(backup.read_text())
    assert saved["domain"] == "dsh_github_reviewer" and saved["backend"] == "json"
    assert sum(len(rows) for rows in saved["tables"].values()) == held


@pytest.fixture
def sandbox80_shop(tmp_path):
    import asyncio

    from dsh_github_reviewer.testing import SandboxGitHub
    from dsh_github_reviewer.testing.deployment import Deployment
    from dsh_github_reviewer.testing.scenario import build_shop, model_server

    with SandboxGitHub.on_loopback_80() as sb, model_server() as model:
        build_shop(sb)

        async def review_once() -> Path:
            dep = await Deployment(tmp_path, sb, model, backend="sqlite").start()
            try:
                await dep.tick()
            finally:
                await dep.stop()
            return dep.write_config()
        yield asyncio.run(review_once())


# -- 8: without root, the demo says what it needs and the port-80 tests skip -------------------

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def _as_nobody(args: list[str], cwd: Path) -> tuple[int, str]:
    import os
    import subprocess

    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env |= {"HOME": str(cwd), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([*NOBODY, *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def nobody_cannot_run(python: str, cwd: Path) -> str | None:
    """Why ``nobody`` cannot run ``python`` with this project importable (None: it can). A venv
    under a root-only directory (e.g. /root) is unreachable once privileges are dropped: the
    tests that need it then skip naming the reason instead of failing."""
    import subprocess

    try:
        proc = subprocess.run([*NOBODY, python, "-c", "import dsh_harness, pytest"], cwd=cwd,
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"nobody cannot run {python}: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return f"nobody cannot run {python} with the project importable: {last}"
    return None


@pytest.fixture
def nobody_dir():
    import os
    import shutil
    import sys
    import tempfile

    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root (to drop to nobody) and setpriv")
    # pytest's tmp_path lies under a root-only directory; nobody needs a reachable one.
    path = Path(tempfile.mkdtemp(prefix="dsh-nobody-"))
    try:
        path.chmod(0o777)
        reason = nobody_cannot_run(sys.executable, path)
        if reason:
            pytest.skip(reason)
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_nobody_tests_skip_naming_why_when_nobody_cannot_use_the_interpreter(nobody_dir,
                                                                               tmp_path):
    """An interpreter nobody cannot reach is a skip with the reason."""
    import sys

    private = tmp_path / "private"   # root-only, like a venv under /root
    private.mkdir(mode=0o700)
    (private / "python").symlink_to(sys.executable)
    reason = nobody_cannot_run(str(private / "python"), nobody_dir)
    assert reason is not None and str(private / "python") in reason
    assert nobody_cannot_run(sys.executable, nobody_dir) is None


def test_demo_without_root_explains_what_it_needs(nobody_dir):
    import sys

    code, out = _as_nobody([sys.executable, "-m", "dsh_harness.cli", "github-reviewer", "demo"],
                           nobody_dir)
    assert code == 1 and "Traceback" not in out, out
    assert "needs root or CAP_NET_BIND_SERVICE" in out and "setcap cap_net_bind_service" in out


def test_port_80_tests_skip_without_root(nobody_dir):
    import sys

    root = Path(__file__).resolve().parents[1]
    code, out = _as_nobody([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                            "--rootdir", str(root), "-c", str(root / "pyproject.toml"),
                            "--basetemp", str(nobody_dir / "bt"),
                            str(root / "tests/reviewer/github/test_mcp_binary.py")], nobody_dir)
    assert code == 0, out
    assert " skipped" in out and " passed" not in out and "error" not in out.lower(), out
    assert "needs root or CAP_NET_BIND_SERVICE" in out


# -- 10: the smaller items ----------------------------------------------------------------------

def test_version_and_help_pages_describe_every_subcommand(tmp_path):
    proc = dsh("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("dsh 0.")
    assert "dsh-github-reviewer" in proc.stdout
    for command, text in [(["storage", "copy"], "copy a domain between backends"),
                          (["sessions", "show"], "the events of one session"),
                          (["config", "check"], "validate dsh.toml"),
                          (["github-reviewer", "status"], "the work record of each account"),
                          (["github-reviewer", "demo"], "needs no config")]:
        proc = dsh(*command, "--help", cwd=tmp_path)
        assert proc.returncode == 0 and text in proc.stdout, (command, proc.stdout)


def test_gh_auth_token_is_accepted(tmp_path):
    (tmp_path / "dsh.toml").write_text(reviewer_toml(
        account='personal_access_token = "gho_' + "x" * 36 + '"'))
    proc = dsh("config", "check", cwd=tmp_path, env=KEYS)
    assert proc.returncode == 0, proc.stderr


def test_only_the_deepseek_provider_reads_deepseek_api_key(tmp_path):
    top = ('default_model = "other/some-model"\n[providers.other]\n'
           'base_url = "https://llm.example.com/v1"')
    (tmp_path / "dsh.toml").write_text(reviewer_toml(top=top))
    err = one_line_error(dsh("config", "check", cwd=tmp_path, env=KEYS))
    assert "provider 'other' has no API key: set providers.other.api_key_env" in err
    top = '[providers.deepseek]\nbase_url = "https://api.deepseek.com"'
    (tmp_path / "dsh.toml").write_text(reviewer_toml(top=top))
    assert dsh("config", "check", cwd=tmp_path, env=KEYS).returncode == 0


# -- Reads create nothing; a refused run leaves no lock; strict booleans -----

@pytest.mark.parametrize("backend", ["sqlite", "json"])
def test_status_and_storage_ls_on_a_fresh_home_create_nothing(tmp_path, backend):
    (tmp_path / "dsh.toml").write_text(reviewer_toml(
        top=f'home = "state"\n[storage]\nbackend = "{backend}"\n'))
    proc = dsh("github-reviewer", "status", cwd=tmp_path, env=KEYS)
    assert proc.returncode == 0, proc.stderr
    proc = dsh("storage", "ls", "--json", cwd=tmp_path, env=KEYS)
    assert proc.returncode == 0, proc.stderr
    assert {row["domain"] for row in json.loads(proc.stdout)} >= {"dsh_github_reviewer"}
    assert not (tmp_path / "state" / "storage" / "dsh.sqlite3").exists()
    assert not (tmp_path / "state" / "storage").exists()


def test_a_run_that_fails_validation_leaves_no_lock_file(tmp_path):
    home = tmp_path / "state"
    home.mkdir()
    (tmp_path / "dsh.toml").write_text(reviewer_toml(top='home = "state"\n'))
    # No model key: the config loads, and validation refuses the run.
    err = one_line_error(dsh("run", "--once", cwd=tmp_path, env={"GITHUB_TOKEN": PAT},
                             timeout=30))
    assert "DEEPSEEK_API_KEY" in err
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("where", [
    ("[web]\nenabled = \"yes\"\n", "web.enabled"),
    ("", "plugins.github-reviewer.enabled"),
    ("", "plugins.github-reviewer.webhook.enabled"),
    ("", "plugins.github-reviewer.accounts[0].review.exclude_builtin"),
])
def test_booleans_accept_only_true_or_false(tmp_path, where):
    top, field = where
    blocks = {"plugins.github-reviewer.enabled": "",
              "plugins.github-reviewer.webhook.enabled":
                  '[plugins.github-reviewer.webhook]\nenabled = 1\nsecret = "' + "s" * 32 + '"\n',
              "plugins.github-reviewer.accounts[0].review.exclude_builtin":
                  '[plugins.github-reviewer.accounts.review]\nexclude_builtin = "on"\n'}
    text = reviewer_toml(top=top, extra_blocks=blocks.get(field, ""))
    if field == "plugins.github-reviewer.enabled":
        text = text.replace("[plugins.github-reviewer]\n", "[plugins.github-reviewer]\n"
                            'enabled = "yes"\n')
    (tmp_path / "dsh.toml").write_text(text)
    err = one_line_error(dsh("config", "check", cwd=tmp_path, env=KEYS))
    assert field in err and "must be true or false" in err, err


# -- `dsh init` writes the example an installed plugin ships -----------------

def test_init_writes_the_shipped_example_and_never_overwrites(tmp_path):
    root = Path(__file__).resolve().parents[1]
    err = one_line_error(dsh("github-reviewer", "status", cwd=tmp_path))
    assert "run `dsh init`" in err
    proc = dsh("init", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote dsh.toml from dsh-github-reviewer's example" in proc.stdout
    written = tmp_path / "dsh.toml"
    assert written.read_text() == (root / "dsh.example.toml").read_text()
    assert written.stat().st_mode & 0o777 == 0o600
    written.write_text("# the operator's edits\n")
    err = one_line_error(dsh("init", cwd=tmp_path))
    assert "already exists; it was left untouched" in err
    assert written.read_text() == "# the operator's edits\n"
    proc = dsh("--config", "other/dsh.toml", "init", cwd=tmp_path)
    assert proc.returncode == 0 and (tmp_path / "other/dsh.toml").exists(), proc.stderr
    proc = dsh("init", "--print", cwd=tmp_path)
    assert proc.stdout == (root / "dsh.example.toml").read_text()
    err = one_line_error(dsh("init", "--plugin", "nope", cwd=tmp_path))
    assert "no installed plugin named 'nope' ships an example config" in err


def test_no_credentials_names_the_default_models_key_variable(tmp_path):
    """The model key is not always DeepSeek's."""
    (tmp_path / "dsh.toml").write_text(reviewer_toml(
        top='default_model = "openai/gpt-4.1"\n',
        account='personal_access_token = "${GITHUB_TOKEN:-}"'))
    err = one_line_error(dsh("config", "check", cwd=tmp_path))
    assert "The model key comes from OPENAI_API_KEY." in err
    assert "DEEPSEEK_API_KEY" not in err


# -- postgres configured, its driver not installed ---------------------------

def _without_psycopg(tmp_path: Path) -> dict[str, str]:
    """An environment where ``import psycopg`` fails, as on a machine without the extra."""
    shadow = tmp_path / "no-psycopg"
    shadow.mkdir()
    for name in ("psycopg", "psycopg_pool"):
        (shadow / f"{name}.py").write_text(f'raise ImportError("No module named {name!r}")\n')
    path = os.pathsep.join(p for p in (str(shadow), os.environ.get("PYTHONPATH", "")) if p)
    return {**KEYS, "PYTHONPATH": path}


def test_postgres_without_its_driver_fails_the_check_and_the_copy(tmp_path):
    env = _without_psycopg(tmp_path)
    dsn = 'dsn = "postgresql://dsh@127.0.0.1:1/dsh"'
    (tmp_path / "dsh.toml").write_text(reviewer_toml(
        top=f'[storage]\nbackend = "postgres"\n{dsn}\n'))
    check = one_line_error(dsh("config", "check", cwd=tmp_path, env=env))
    assert 'storage.backend: "postgres" needs psycopg 3 and psycopg-pool' in check
    assert "pip install 'dsh-github-reviewer[postgres]'" in check
    (tmp_path / "dsh.toml").write_text(reviewer_toml(top=f"[storage]\n{dsn}\n"))
    copy = one_line_error(dsh("sessions", "copy", "--from", "jsonl", "--to", "postgres",
                              cwd=tmp_path, env=env))
    assert 'sessions.store: "postgres" needs psycopg 3' in copy and "copied" not in copy
    assert "verified" not in copy
