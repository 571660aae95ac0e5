#!/usr/bin/env bats
# What one run can see of the world, of other runs and of the service (issue-2 level: a
# private directory, per-worker uids under a root pool, an exact environment).

load helpers/stack

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

@test "isolation: 20 concurrent runs each see only their own canary, in under 12 s" {
	local i start=$SECONDS
	for i in $(seq 1 20); do
		jq -cn --arg code "$(cat "$ROOT/tests/programs/canary.py")" --arg c "canary-$i-$RANDOM" \
			'{code: $code, stdin: $c}' |
			curl -s --max-time 30 -o "$BATS_TEST_TMPDIR/r$i" -w '%{http_code}\n' \
				--data-binary @- "$BASE/execute" >"$BATS_TEST_TMPDIR/c$i" 3>&- &
	done
	wait
	# the bound is the product's: a sanitized build (several times slower under ASan, beside
	# the other lanes) is held to each request's own 30 s
	[[ -n ${CODEBOX_ASAN:-} ]] || ((SECONDS - start < 12))
	for i in $(seq 1 20); do
		assert_equal "$(cat "$BATS_TEST_TMPDIR/c$i")" 200
		run -0 jq -e --arg i "$i" '.status == "succeeded" and .resultError == null and
			(.result.own | startswith("canary-" + $i + "-")) and .result.foreign == [] and
			.result.parent == "PermissionError"' "$BATS_TEST_TMPDIR/r$i"
	done
	# twenty distinct working directories
	run -0 bash -c "jq -r .result.cwd '$BATS_TEST_TMPDIR'/r* | sort -u | wc -l"
	assert_output 20
}

@test "isolation: os.listdir('..') raises PermissionError" {
	execute $'import os\ntry:\n    os.listdir("..")\nexcept PermissionError as e:\n    print("PermissionError")'
	assert_equal "$(field .stdout)" PermissionError
}

@test "isolation: the working directory holds only main.py, and HOME and TMPDIR are it" {
	execute $'import os, tempfile\nprint(sorted(os.listdir(".")))\nprint(os.environ["HOME"] == os.getcwd() == os.environ["TMPDIR"] == tempfile.gettempdir())'
	assert_equal "$(field .stdout)" $'[\'main.py\']\nTrue'
}

@test "isolation: the environment is exactly the documented one" {
	export CODEBOX_SECRET_FOR_TEST=leak
	execute $'import os, json\nprint(json.dumps(sorted(os.environ)))\nprint(os.environ["PATH"], os.environ["LANG"], os.environ["OPENBLAS_NUM_THREADS"], os.environ["OMP_NUM_THREADS"], os.environ["MKL_NUM_THREADS"])'
	run -0 jq -e '.stdout | split("\n")[0] | fromjson ==
		["HOME","LANG","MKL_NUM_THREADS","OMP_NUM_THREADS","OPENBLAS_NUM_THREADS","PATH","TMPDIR"]' <<<"$reply"
	assert_equal "$(field '.stdout | split("\n")[1]')" "/usr/local/bin:/usr/bin:/bin C.UTF-8 1 1 1"
}

@test "isolation: the program runs as python3 -I -u main.py with empty stdin" {
	execute $'import sys\nprint(open("/proc/self/cmdline").read().split("\\0")[:-1], sys.flags.isolated, sys.stdout.write_through)\nprint(repr(sys.stdin.read()))'
	assert_equal "$(field .stdout)" $'[\'/usr/bin/python3\', \'-I\', \'-u\', \'main.py\'] 1 True\n\'\''
}

@test "isolation: no variables, imports or files survive from one run to the next" {
	local i
	execute $'import builtins, sys, json\nbuiltins.LEFTOVER = 1\nsys.modules["leftover_mod"] = sys\nopen("leftover.txt", "w").write("x")\nprint("planted")'
	assert_equal "$(field .stdout)" planted
	# several runs, so that at least one lands on the same worker
	for i in $(seq 1 30); do
		execute $'import builtins, sys, os\nprint(hasattr(builtins, "LEFTOVER"), "leftover_mod" in sys.modules, sorted(os.listdir(".")))'
		assert_equal "$(field .stdout)" "False False ['main.py']"
	done
}

@test "isolation: a root pool runs programs as an unprivileged uid that cannot signal the worker" {
	[[ $EUID -eq 0 ]] || skip "per-worker uids need a root pool; without it see the namespace layers"
	execute $'import os\nprint(os.getuid() != 0, os.getgid() != 0, os.getgroups())\ntry:\n    os.kill(os.getppid(), 9)\n    print("killed the worker")\nexcept PermissionError:\n    print("PermissionError")'
	assert_equal "$(field .stdout)" $'True True []\nPermissionError'
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
}

@test "isolation: the worker's environment and command line are not readable from a run" {
	[[ $EUID -eq 0 ]] || skip "per-worker uids need a root pool; without it see the namespace layers"
	execute $'import os\nfor what in ("environ", "cwd"):\n    try:\n        p = f"/proc/{os.getppid()}/{what}"\n        os.listdir(p) if what == "cwd" else open(p).read()\n        print(what, "readable")\n    except PermissionError:\n        print(what, "PermissionError")'
	assert_equal "$(field .stdout)" $'environ PermissionError\ncwd PermissionError'
}

@test "isolation: the FastCGI socket is out of a run's reach" {
	[[ $EUID -eq 0 ]] || skip "socket permissions separate runs only under a root pool"
	execute "import socket; s = socket.socket(socket.AF_UNIX); s.connect('$STACK_DIR/fcgi.sock')"
	assert_equal "$(field .status)" failed
	run -0 field .stderr
	assert_line --partial PermissionError
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
}
