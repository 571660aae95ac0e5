#!/usr/bin/env bats
# Pictures: matplotlib draws with Agg from the font cache built ahead; plt.show() and figures
# left open come back as figure-N.png artifacts, and over MCP as image blocks. Warm (the heavy
# tier preloads matplotlib.pyplot here, as by default) and cold (the cold pass runs this file).

load helpers/stack
load helpers/mcp

setup_file() {
	export CODEBOX_WARM_MODULES=numpy,matplotlib.pyplot CODEBOX_WARM_LIGHT_MODULES=
	stack_start
}

teardown_file() {
	stack_stop
}

# the café's prices as a line chart, shown as a notebook would (the program make bench times)
chart=$(cat "$BATS_TEST_DIRNAME/programs/plot.py")

# png_info FILE: "WIDTHxHEIGHT" from a PNG's IHDR, or nothing when FILE is not a PNG
png_info() {
	python3 - "$1" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
if b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR":
    w, h = struct.unpack(">II", b[16:24])
    print("%dx%d" % (w, h))
EOF
}

@test "figures: plt.show() comes back as a PNG artifact: a line chart of the café's prices" {
	execute "$chart" '{artifacts: true}'
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "[3.0, 2.0, 5.0]"
	# no warning about a backend, a display or a font cache
	assert_equal "$(field .stderr)" ""
	run -0 jq -c '[.artifacts[] | [.path, .mimeType, .omitted]]' <<<"$reply"
	assert_output '[["figure-1.png","image/png",null]]'
	jq -r '.artifacts[0].contentBase64' <<<"$reply" | base64 -d >"$BATS_TEST_TMPDIR/chart.png"
	assert_equal "$(png_info "$BATS_TEST_TMPDIR/chart.png")" 640x480
	local bytes
	bytes=$(stat -c %s "$BATS_TEST_TMPDIR/chart.png")
	assert_equal "$(jq '.artifacts[0].bytes' <<<"$reply")" "$bytes"
	# a real drawing (a line, markers, a title, axes), not an empty canvas
	((bytes > 10000 && bytes < 200000))
	if [[ ${CODEBOX_WARM:-1} == 1 ]]; then
		assert_equal "$(grep -c '"tier":"heavy"' "$STACK_DIR/logs/pool.log")" "$(grep -c '"api":"execute"' "$STACK_DIR/logs/pool.log")"
	fi
}

@test "figures: figures left open are saved at exit, after savefig's own files; show() closes what it saved" {
	execute 'import matplotlib.pyplot as plt
plt.figure(); plt.plot([1, 2, 3])
plt.savefig("mine.png")
plt.show()
plt.figure(); plt.bar([1, 2], [3, 4])
plt.figure(); plt.scatter([1], [1])
open("figure-3.png", "w").write("taken")' '{artifacts: true}'
	assert_equal "$(field .status)" succeeded
	run -0 jq -c '[.artifacts[] | [.path, .mimeType]]' <<<"$reply"
	# show() saved the first (figure-1); exit the two left open, past the name the program took
	assert_output '[["figure-1.png","image/png"],["figure-2.png","image/png"],["figure-3.png","text/plain"],["figure-4.png","image/png"],["mine.png","image/png"]]'
}

@test "figures: matplotlib leaves nothing in the run's environment or working directory" {
	execute 'import os
import matplotlib
import matplotlib.pyplot as plt
print(matplotlib.get_backend(), "MPLCONFIGDIR" in os.environ, sorted(os.listdir(".")))
plt.plot([1])
plt.savefig("x.svg")
print(sorted(os.listdir(".")))' '{artifacts: true}'
	assert_equal "$(field .stdout)" "agg False ['main.py']
['main.py', 'x.svg']"
	assert_equal "$(field .stderr)" ""
	run -0 jq -c '[.artifacts[] | [.path, .mimeType]]' <<<"$reply"
	assert_output '[["figure-1.png","image/png"],["x.svg","image/svg+xml"]]'
	# without artifacts: the lab's eight keys
	execute "$chart"
	run -0 jq -e 'has("artifacts") | not' <<<"$reply"
	# a program that never imports matplotlib sees nothing of the hook
	execute 'import os; print(sorted(os.listdir(".")), sorted(os.listdir("/tmp")), "MPLCONFIGDIR" in os.environ)' '{artifacts: true}'
	assert_equal "$(field .stdout)" "['main.py'] [] False"
	assert_equal "$(jq -c .artifacts <<<"$reply")" '[]'
}

@test "figures: over MCP the chart is an image block the model sees, with or without artifacts" {
	local out
	call 1 "$(jq -cn --arg code "$chart" '{code: $code}')"
	out=$reply
	run -0 jq -r '.result.content | map(.type) | join(",")' <<<"$out"
	assert_output text,image
	run -0 jq -r '.result.content[1].mimeType' <<<"$out"
	assert_output image/png
	jq -r '.result.content[1].data' <<<"$out" | base64 -d >"$BATS_TEST_TMPDIR/mcp.png"
	assert_equal "$(png_info "$BATS_TEST_TMPDIR/mcp.png")" 640x480
	run -0 jq -r '.result.content[0].text' <<<"$out"
	assert_output --partial "file: figure-1.png (image/png, "
	# structuredContent is /execute's answer: artifacts only when asked for
	run -0 jq -e '.result.structuredContent | has("artifacts") | not' <<<"$out"
	call 2 "$(jq -cn --arg code "$chart" '{code: $code, artifacts: true}')"
	out=$reply
	run -0 jq -r '.result.structuredContent.artifacts[0].path' <<<"$out"
	assert_output figure-1.png
}

@test "figures: over MCP only pictures are collected unless files are asked for: a chart after 40 other files is shown" {
	local prog out
	# ($code is mcp()'s HTTP status.) 40 text files sort before z-chart.png: collected as files, the 32 sent before it would
	# leave it unsent (maxArtifacts), and the model would see no picture
	prog=$(printf '%s\n' 'import matplotlib.pyplot as plt' \
		'for i in range(40): open("a-%02d.txt" % i, "w").write("x")' \
		'plt.plot([1, 2]); plt.savefig("z-chart.png"); plt.close("all")')
	call 1 "$(jq -cn --arg code "$prog" '{code: $code}')"
	out=$reply
	run -0 jq -r '.result.content | map(.type) | join(",")' <<<"$out"
	assert_output text,image
	run -0 jq -r '.result.content[0].text' <<<"$out"
	assert_output --partial "file: z-chart.png (image/png, "
	refute_output --partial "a-00.txt"
	# asked for: every file, as on /execute, within the same bounds
	call 2 "$(jq -cn --arg code "$prog" '{code: $code, artifacts: true}')"
	out=$reply
	run -0 jq -r '[.result.structuredContent.artifacts[] | select(.path | startswith("a-"))] | length' <<<"$out"
	assert_output 40
	run -0 jq -r '.result.structuredContent.artifacts[] | select(.path == "z-chart.png") | .omitted' <<<"$out"
	assert_output --partial "maxArtifacts files were sent before it"
	run -0 jq -r '.result.content | map(.type) | join(",")' <<<"$out"
	assert_output text
}

@test "figures: the official MCP SDK's client gets the chart as an image block (its result schema holds)" {
	local result
	run -0 mcp_client "$BASE/mcp" call code_executor "$(jq -cn --arg c "$chart" '{code: $c}')"
	result=$output
	run -0 jq -e '.isError == false and .content[0].type == "text" and .content[1].type == "image" and
		.content[1].mimeType == "image/png"' <<<"$result"
	jq -r '.content[1].data' <<<"$result" | base64 -d >"$BATS_TEST_TMPDIR/sdk.png"
	assert_equal "$(png_info "$BATS_TEST_TMPDIR/sdk.png")" 640x480
}
