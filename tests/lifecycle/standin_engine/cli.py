"""The stand-in `pulumi` command line: the commands and flags the Automation API uses, refusing others
the way the real CLI does, and the light commands that need no engine (stack, config, cancel)."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
from typing import Any

from .control import append, control
from .store import CliError, Stack, all_stacks, now, project_name

VERSION = "3.210.0"
GLOBAL_VALUES = {
    "--color",
    "--cwd",
    "-C",
    "--verbose",
    "-v",
    "--tracing",
    "--profiling",
    "--memprofilerate",
    "--otel-traces",
}
GLOBAL_SWITCHES = {
    "--non-interactive",
    "--logflow",
    "--logtostderr",
    "--disable-integrity-checking",
    "--emoji",
    "--fully-qualify-stack-names",
}
_OP_VALUES = {
    "--stack",
    "-s",
    "--client",
    "--exec-kind",
    "--event-log",
    "--parallel",
    "-p",
    "--message",
    "-m",
    "--config-file",
    "--target",
    "-t",
    "--exclude",
    "--policy-pack",
    "--policy-pack-config",
    "--exec-agent",
}
_OP_SWITCHES = {
    "--yes",
    "-y",
    "--skip-preview",
    "-f",
    "--diff",
    "--debug",
    "--target-dependents",
    "--exclude-dependents",
    "--suppress-outputs",
    "--suppress-progress",
    "--run-program",
    "--refresh",
    "--expect-no-changes",
    "--attach-debugger",
    "--json",
    "-j",
}
# command -> (flags that take a value, switches); a flag outside both fails like the real CLI.
FLAGS: dict[str, tuple[set[str], set[str]]] = {
    "up": (_OP_VALUES | {"--replace", "--plan"}, _OP_SWITCHES | {"--show-secrets", "--continue-on-error"}),
    "preview": (
        _OP_VALUES | {"--replace", "--save-plan", "--import-file"},
        _OP_SWITCHES | {"--show-secrets"},
    ),
    "destroy": (
        _OP_VALUES,
        _OP_SWITCHES | {"--remove", "--preview-only", "--exclude-protected", "--continue-on-error"},
    ),
    "refresh": (
        _OP_VALUES | {"--import-pending-creates"},
        _OP_SWITCHES | {"--preview-only", "--clear-pending-creates", "--skip-pending-creates"},
    ),
    "stack init": ({"--stack", "-s", "--secrets-provider", "--copy-config-from", "--teams"}, {"--no-select"}),
    "stack select": ({"--stack", "-s", "--secrets-provider"}, {"--create", "-c"}),
    "stack rm": (
        {"--stack", "-s"},
        {"--yes", "-y", "--force", "-f", "--preserve-config", "--remove-backups"},
    ),
    "stack ls": ({"--organization", "-o", "--project", "-p", "--tag", "-t"}, {"--json", "-j", "--all", "-a"}),
    "stack output": ({"--stack", "-s"}, {"--json", "-j", "--show-secrets", "--shell"}),
    "stack history": (
        {"--stack", "-s", "--page-size", "--page"},
        {"--json", "-j", "--show-secrets", "--full-dates"},
    ),
    "stack export": ({"--stack", "-s", "--file", "--version"}, {"--show-secrets"}),
    "config": ({"--stack", "-s"}, {"--show-secrets", "--json", "-j"}),
    "config set-all": ({"--stack", "-s", "--plaintext", "--secret", "--json"}, {"--path"}),
    "config refresh": ({"--stack", "-s"}, {"--force", "-f"}),
    "cancel": ({"--stack", "-s"}, {"--yes", "-y"}),
    "version": (set(), set()),
}
COMMANDS = {"up", "preview", "destroy", "refresh", "stack", "config", "cancel", "version"}
SUBCOMMANDS = {
    "stack": {"init", "select", "rm", "ls", "output", "history", "export"},
    "config": {"set-all", "refresh"},
}


def _words(argv: list[str]) -> list[str]:
    """The words of a command line, without flags and the values of `--stack`-like flags."""
    words: list[str] = []
    takes_value = GLOBAL_VALUES | {"--stack", "-s"}
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in takes_value
        else:
            words.append(arg)
    return words


class Args:
    """The parsed command line: the command words, flag values (repeatable) and switches."""

    def __init__(self, argv: list[str]) -> None:
        words: list[str] = []
        head = _words(argv)[:2]
        command = head[0] if head else ""
        if command not in COMMANDS:
            raise CliError(
                f'error: unknown command "{command}" for "pulumi"\nRun \'pulumi --help\' for usage.'
            )
        if command in SUBCOMMANDS and len(head) > 1:
            if head[1] not in SUBCOMMANDS[command]:
                raise CliError(f'error: unknown command "{head[1]}" for "pulumi {command}"')
            command = f"{command} {head[1]}"
        values, switches = FLAGS.get(command, (set(), set()))
        values, switches = values | GLOBAL_VALUES, switches | GLOBAL_SWITCHES
        self.command = command
        self.values: dict[str, list[str]] = {}
        self.switches: dict[str, str] = {}
        skip = len(command.split())
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg == "--":
                words.extend(argv[i + 1 :])
                break
            if arg.startswith("-"):
                name, eq, value = arg.partition("=")
                if name in values:
                    if not eq:
                        if i + 1 >= len(argv):
                            raise CliError(f"error: flag needs an argument: {name}")
                        i += 1
                        value = argv[i]
                    self.values.setdefault(name, []).append(value)
                elif name in switches:
                    if eq and value not in ("true", "false"):
                        raise CliError(
                            f'error: invalid argument "{value}" for "{name}" flag: strconv.ParseBool: parsing "{value}": invalid syntax'
                        )
                    self.switches[name] = value or "true"
                else:
                    raise CliError(f"error: unknown flag: {name}")
            elif skip:
                skip -= 1
            else:
                words.append(arg)
            i += 1
        self.words = words

    def value(self, *names: str) -> str | None:
        for name in names:
            if name in self.values:
                return self.values[name][-1]
        return None

    def on(self, *names: str) -> bool:
        return any(self.switches.get(name) == "true" for name in names)


def _stack(args: Args, project: str) -> Stack:
    name = args.value("--stack", "-s")
    if not name:
        raise CliError("error: no stack selected; please use `pulumi stack select` to choose one")
    return Stack(project, name)


def _plain(value: Any, show: bool) -> Any:
    """Wire-form outputs as the CLI prints them: secrets shown or masked."""
    secret_sig = "1b47061264138c4ac30d75fd1eb44270"
    if isinstance(value, dict):
        if value.get("4dabf18193072939515e22adb298388d") == secret_sig:
            return _plain(value.get("value"), show) if show else "[secret]"
        return {k: _plain(v, show) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, show) for v in value]
    return value


def light(args: Args) -> None:
    """The commands that need no engine."""
    command = args.command
    if command == "version":
        if control().get("version_fails"):
            raise CliError("error: could not determine the CLI version: the installation is corrupt", code=1)
        print("v" + control().get("version", VERSION))
        return
    project = project_name()
    if command == "stack ls":
        rows = []
        for folder, name, path in all_stacks():
            if folder != project and not args.on("--all", "-a"):
                continue
            data = json.loads(path.read_text())
            stack = Stack(folder, name)
            history = stack.history()
            row: dict[str, Any] = {
                "name": name if folder == project else f"organization/{folder}/{name}",
                "current": False,
                "resourceCount": len(data["resources"]),
            }
            if stack.locks():
                row["updateInProgress"] = True
            elif history:
                row["lastUpdate"] = history[-1]["endTime"]
            rows.append(row)
        print(json.dumps(rows, indent=4))
        return
    if command == "stack init":
        name = args.words[0] if args.words else args.value("--stack", "-s")
        if not name:
            raise CliError("error: missing stack name")
        Stack(project, name).init(args.value("--secrets-provider"))
        print(f"Created stack '{name}'")
        return
    if command == "stack rm":
        name = args.words[0] if args.words else args.value("--stack", "-s")
        stack = Stack(project, name or "")
        stack.remove(force=args.on("--force", "-f"), preserve_config=args.on("--preserve-config"))
        print(f"Stack '{name}' has been removed!")
        return
    stack = _stack(args, project)
    if command == "stack select" and not stack.exists() and control().get("race_init"):
        # another run creates the stack between this select and the caller's `stack init`
        Stack(project, stack.name).init("passphrase")
        raise CliError(f"error: no stack named '{stack.name}' found")
    stack.require()
    if command == "stack select":
        return
    if command == "cancel":
        if not args.on("--yes", "-y"):
            raise CliError("error: --yes must be passed in to proceed when running in non-interactive mode")
        stack.cancel()
        print(f"The currently running update for '{stack.name}' has been canceled!")
        return
    if command == "config set-all":
        stack.unlock_secrets()
        entries = []
        for flag, secret in (("--plaintext", False), ("--secret", True)):
            for pair in args.values.get(flag, []):
                key, _, value = pair.partition("=")
                entries.append((key, value, secret))
        stack.set_config(entries)
        return
    if command == "config refresh":
        return
    if command == "config":  # `pulumi config --show-secrets --json`: key -> {value, secret}
        if args.on("--show-secrets"):
            stack.unlock_secrets()
        values, secret_keys = stack.config_values()
        shown = {
            key: {
                "value": value if args.on("--show-secrets") or key not in secret_keys else "[secret]",
                "secret": key in secret_keys,
            }
            for key, value in values.items()
        }
        print(json.dumps(shown, indent=4))
        return
    if command == "stack output":
        if args.on("--show-secrets"):
            stack.unlock_secrets()
        print(json.dumps(_plain(stack.load().get("outputs", {}), args.on("--show-secrets")), indent=4))
        return
    if command == "stack history":
        entries = list(reversed(stack.history()))
        size = args.value("--page-size")
        if size:
            page = int(args.value("--page") or 1)
            entries = entries[(page - 1) * int(size) : page * int(size)]
        print(json.dumps(entries, indent=4))
        return
    if command == "stack export":
        stack.unlock_secrets()
        data = stack.load()
        print(
            json.dumps(
                {
                    "version": 3,
                    "deployment": {
                        "manifest": {"time": now()},
                        "resources": data["resources"],
                        "pending_operations": data["pending_operations"],
                    },
                }
            )
        )
        return
    raise CliError(f'error: unknown command "{command}" for "pulumi"')


@functools.cache
def enable_site() -> None:
    """Site processing, once: the executable starts with -S (standin_support.install), and the commands
    that run a program need the .pth files (llmctl's editable finder among them)."""
    import site

    site.main()


def main() -> None:
    argv = sys.argv[1:]
    try:
        args = Args(argv)
        append(
            "calls.jsonl",
            {
                "command": args.command,
                "args": argv,
                "cwd": os.getcwd(),
                "backend": os.environ.get("PULUMI_BACKEND_URL"),
                "passphrase_file": os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"),
                "delete_unreachable": os.environ.get("PULUMI_K8S_DELETE_UNREACHABLE"),
            },
        )
        if args.command in ("up", "preview", "destroy", "refresh"):
            enable_site()
            from .operation import operate

            code = operate(args)
            sys.stdout.flush()
            os._exit(code)  # gRPC threads must not hold the exit
        light(args)
    except CliError as exc:
        if exc.stdout:
            print(exc.stdout)
        print(exc.message, file=sys.stderr)
        sys.exit(exc.code)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
