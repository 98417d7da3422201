"""The help texts of the ``llmfleet`` commands (rich markup)."""

from __future__ import annotations

from llmfleet.paths import ENV_HOME

EXIT_CODES_EPILOG = (
    "[bold]Exit codes[/bold]\n"
    "  [green]0[/green]    success\n"
    "  [red]1[/red]    could not start: bad arguments (any usage error), inventory not found, "
    "collection not found\n"
    "  [red]2[/red]    one or more hosts failed a task\n"
    "  [red]3[/red]    hosts unreachable (and none failed a task)\n"
    "  [red]4[/red]    ansible could not parse the playbook or inventory\n"
    "  [yellow]130[/yellow]  interrupted (Ctrl-C)"
)

APP_HELP = (
    "Turn a few machines into a private [bold]vLLM[/bold] backend for coding agents.\n\n"
    "llmfleet drives the [bold]llmfleet.cluster[/bold] Ansible collection: "
    "[cyan]llmfleet up[/cyan] configures every host of an inventory and shows, per host, what "
    "is done, what changed and what failed. [cyan]llmfleet lab[/cyan] runs a throwaway cluster "
    "of containers to try it on.\n\n"
    "[bold]Quick start[/bold] (in the checkout)\n"
    "  [cyan]make demo[/cyan]   bring a lab cluster up end to end\n"
    "  [cyan]make test[/cyan]   run the tests\n\n"
    "[bold]Example[/bold]\n"
    "  [cyan]llmfleet up -i inventory/sparks --limit spark-1[/cyan]\n\n"
    "The collection (the directory holding galaxy.yml and site.yml) is found from the current "
    f"directory upwards, or set [cyan]{ENV_HOME}[/cyan]."
)

UP_HELP = (
    "Bring hosts to their configured state: run [cyan]site.yml[/cyan] (or "
    "[cyan]playbooks/NAME.yml[/cyan] with [cyan]--playbook NAME[/cyan]) against an inventory."
    "\n\n"
    "Idempotent: after fixing a failure, run it again. In a terminal a live table shows each "
    "host's progress, and a failing task is printed at once with its message and the tail of its "
    "output. With [cyan]--plain[/cyan] (automatic when stdout is not a terminal, e.g. in CI) each "
    "finished task is one log line instead. ansible-runner's record of each run (job events, "
    "output) is kept in a folder of its own under [cyan]artifacts/runs/[/cyan], owner-only, "
    "secrets hidden.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet up -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet up -i inventory/sparks --limit spark-1 --tags vllm -e vllm_server_port=8001"
    "[/cyan]\n"
    "  [cyan]llmfleet up -i inventory/sparks --check --diff[/cyan]   "
    "dry run, show what would change\n"
    "  [cyan]llmfleet up -i inventory/sparks --playbook NAME[/cyan]   "
    "run playbooks/NAME.yml\n"
    "  [cyan]llmfleet up -i inventory/sparks --json[/cyan]   "
    "the result as JSON on stdout"
)

CHECK_HELP = (
    "Check an inventory without changing any host: run [cyan]playbooks/validate.yml[/cyan], "
    "the play that [cyan]llmfleet up[/cyan] starts with.\n\n"
    "Every host must answer; every role's settings are checked for every host it would run on; "
    "the model's attention heads against the tensor parallel layout (with the layouts that "
    "would work); the model on every serving host; ports that collide on one host; keys that "
    "are placeholders or short. Each failure names the host, the variable, the bad value and "
    "what is expected.\n\n"
    "[bold]Example[/bold]\n"
    "  [cyan]llmfleet check -i inventory/sparks[/cyan]"
)

BENCH_HELP = (
    "Benchmark the served endpoint: run [cyan]playbooks/bench.yml[/cyan] (the benchmark role) "
    "against an inventory.\n\n"
    "Streams chat completions through the matrix in [cyan]benchmark_scenarios[/cyan] (warm-up, "
    "short prompts at concurrency 4 and 8, a long prompt at 2, concurrency 1/64/256, prefill "
    "1K/8K/32K), reads the fabric's RDMA counters around the run, and writes JSON, markdown and a "
    "PNG plot under [cyan]artifacts/bench/[/cyan], compared with the previous run. A progress bar "
    "shows the scenario and the requests done; with [cyan]--json[/cyan] the result names the "
    "report files.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet bench -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet bench -i inventory/lab -e benchmark_max_errors=5[/cyan]\n"
    "  [cyan]llmfleet bench -i inventory/sparks --json | jq .reports[/cyan]"
)

UPGRADE_HELP = (
    "Switch what the serving hosts run, keep it only when it proves itself, and go back by "
    "itself otherwise: run [cyan]playbooks/upgrade.yml[/cyan].\n\n"
    "Only what is named changes: vLLM's (and Ray's) image with [cyan]--image[/cyan] (tag and "
    "digest), the model profile with [cyan]--profile[/cyan], the model's revision on the hub "
    "with [cyan]--model-revision[/cyan]. The inventory is checked with the target, the image "
    "is pulled and the weights fetched on every serving host before anything stops; then vLLM "
    "restarts and must answer /health, /v1/models and one request on each API (OpenAI's chat "
    "completions, Anthropic's messages). When any host fails, every host goes back to what it "
    "served before and the run fails saying why (exit 2). Each host's history "
    "([cyan]/var/lib/llmfleet/history.json[/cyan]) lists every switch and its outcome; after an "
    "upgrade that sticks, only the last [cyan]--keep-images[/cyan] images that served stay.\n\n"
    "With [cyan]--bench-gate PCT[/cyan], one short benchmark scenario runs before the switch "
    "and again after it: a target slower by more than PCT percent (output tokens/s, TTFT p50) "
    "fails the switch and is rolled back like any other.\n\n"
    "A later [cyan]llmfleet up[/cyan] serves what the inventory names: the run ends with the "
    "settings to write there to keep the upgrade.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet upgrade -i inventory/sparks --image "
    "vllm/vllm-openai:v0.12.0@sha256:<64 hex>[/cyan]\n"
    "  [cyan]llmfleet upgrade -i inventory/sparks --profile minimax_m27_two_sparks "
    "--bench-gate 10[/cyan]\n"
    "  [cyan]llmfleet upgrade -i inventory/sparks --model-revision <commit>[/cyan]"
)

PLAN_HELP = (
    "Plan the KV cache of every vLLM launch of an inventory, without reaching any host: run "
    "[cyan]playbooks/plan.yml[/cyan] on this machine and print, for each launch (the Spark "
    "cluster, each single-node GPU host), every tensor x pipeline parallel layout whose TP "
    "divides the model's heads: per GPU the weights, the KV cache bytes per token, the KV "
    "cache in tokens and the maximum concurrency at max_model_len, whether it fits and why "
    "not, then the assumptions (the allowance for what vLLM measures at start). The numbers "
    "follow vLLM's own formulas (docs/capacity.md).\n\n"
    "The model is the profile's [cyan]model_config[/cyan] (or config.json, when the model is "
    "a folder on this machine), the GPU's memory [cyan]llmfleet_gpu_memory_gib[/cyan]. Exit "
    "code 2 when the layout asked for does not fit, 1 when the plan cannot be made.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet plan -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet plan -i inventory/sparks -e llmfleet_vllm_profile=qwen3_vl_two_sparks"
    "[/cyan]\n"
    "  [cyan]llmfleet plan -i inventory/gh200 --json | jq '.plans[0].plan.layout'[/cyan]"
)

STATUS_HELP = (
    "Show what every serving host runs, without changing anything: run "
    "[cyan]playbooks/status.yml[/cyan] and print a column per host: the collection's units and "
    "containers (state, for how long, how often systemd restarted them), whether vLLM answers "
    "and which model it serves (or that the host is a headless rank), the profile, image and "
    "model revision its history records, the parallel layout, Ray's nodes, each fabric link "
    "(state, speed, MTU, address), swap and the memory each GPU has free as vLLM's start-up "
    "check reads it, then the last benchmark's headline.\n\n"
    "Green is as it should be, red needs a look ([cyan]llmfleet doctor[/cyan] says why and "
    "what to do), yellow is unknown. A host that cannot be read is shown with the reason; the "
    "exit code is then 2 (a task failed) or 3 (unreachable).\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet status -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet status -i inventory/sparks --limit spark-2[/cyan]\n"
    "  [cyan]llmfleet status -i inventory/sparks --json | jq '.hosts[].vllm'[/cyan]"
)

LOGS_HELP = (
    "Show the logs of what the collection runs on every serving host (each vLLM rank, the "
    "watchdog of a headless rank, Ray, the firewall, monitoring; journal and container "
    "output), host-prefixed and merged in time order: run [cyan]playbooks/logs.yml[/cyan], "
    "read-only.\n\n"
    "[cyan]--follow[/cyan] then streams what is logged next, from where the listing stopped "
    "(the journal's cursor: nothing lost, nothing twice), until Ctrl-C. Ansible cannot stream, "
    "so following reaches the hosts with ssh itself, with the address, port, user, key, SSH "
    "arguments and sudo the inventory gives them.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet logs -i inventory/sparks --since 10m[/cyan]\n"
    "  [cyan]llmfleet logs -i inventory/sparks --host spark-2 -n 50 --follow[/cyan]"
)

DOWN_HELP = (
    "Stop and remove what the collection runs on the serving hosts: every vLLM rank, the "
    "watchdog of a headless rank, Ray (systemd units and containers), and monitoring with "
    "[cyan]--monitoring[/cyan]; run [cyan]playbooks/down.yml[/cyan]. The last logs of every "
    "host are kept first, in [cyan]artifacts/down/<UTC time>/logs.txt[/cyan] (merged in time "
    "order; one JSON file per host beside it).\n\n"
    "[cyan]--purge[/cyan] also removes the configuration, environment and secret files and the "
    "firewall the collection wrote; [cyan]--purge-network[/cyan] the CX7 netplan file, which "
    "takes the fabric addresses off the links. Model weights and images stay. A second "
    "[cyan]down[/cyan] changes nothing; [cyan]llmfleet up[/cyan] serves again.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet down -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet down -i inventory/sparks --check[/cyan]\n"
    "  [cyan]llmfleet down -i inventory/sparks --purge --monitoring[/cyan]"
)

DOCTOR_HELP = (
    "Check a live cluster without changing it: run [cyan]playbooks/doctor.yml[/cyan] and "
    "print each finding with its evidence and the fix. The checks are the silent failures of "
    "the field notes: vLLM started as a [cyan]ray://[/cyan] client; ranks of a group that do "
    "not run or lost each other; NCCL/Gloo bound to another interface than the fabric's; RDMA "
    "counters that do not move under a probe request (NCCL fell back to sockets); MTU or "
    "subnet mismatch between peers; a fabric link down or under 200000Mb/s; a RoCE GID index "
    "in the environment file that is no longer the device's; swap on; page cache holding the "
    "memory vLLM needs at its next restart; ranks on different vLLM, image or model revision; "
    "Ray's memory monitor or object store not as configured; clock skew.\n\n"
    "One chat request goes through the model (the probe). Exit code 2 when a check finds a "
    "problem.\n\n"
    "[bold]Examples[/bold]\n"
    "  [cyan]llmfleet doctor -i inventory/sparks[/cyan]\n"
    "  [cyan]llmfleet doctor -i inventory/sparks --json | jq '.findings[] | "
    'select(.status=="problem")\'[/cyan]'
)
