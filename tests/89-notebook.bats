#!/usr/bin/env bats
# Sessions that answer as a notebook kernel does (API.md "A cell's outputs"): execution counts,
# outputs in nbformat 4's form in the order the program made them, the error as
# {name, value, traceback}, display() and IPython's display objects, figures left open, a
# hostile display object bounded, and the session as an .ipynb that nbformat validates. Warm
# only (sessions are).

load helpers/stack
load helpers/sessions
load helpers/mcp

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

setup() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
}

teardown() {
	session_teardown
}

# out I JQ: field JQ of the reply's I-th output
out() {
	jq -r ".outputs[$1]$2" <<<"$reply"
}

@test "notebook: a failing cell's error is {name, value, traceback}, and an error output; stderr keeps its traceback" {
	session_new
	run_in "$sid" 'print("before")
def f():
    raise KeyError("missing")
f()'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" 1
	assert_equal "$(field .error.name)" KeyError
	assert_equal "$(field .error.value)" "'missing'"
	run -0 jq -e '.error.traceback | type == "array" and length >= 3 and
		.[0] == "Traceback (most recent call last):" and .[-1] == "KeyError: '"'missing'"'" and
		all(.[]; test("\n$") | not)' <<<"$reply"
	# the outputs in order: the print, then the error (its traceback in the error output, not
	# again as stderr text)
	run -0 jq -c '[.outputs[] | .output_type]' <<<"$reply"
	assert_output '["stream","error"]'
	assert_equal "$(out 0 .text)" before
	run -0 jq -e '.outputs[1] | .ename == "KeyError" and .evalue == "'"'missing'"'" and
		.traceback == $e' --argjson e "$(jq .error.traceback <<<"$reply")" <<<"$reply"
	assert_regex "$(field .stderr)" "^Traceback \(most recent call last\):.*KeyError: 'missing'$"
	# a cell that succeeds has error null; SystemExit is an exit code, not an error
	run_in "$sid" 'import sys
sys.exit(3)'
	assert_equal "$(field .exitCode)" 3
	assert_equal "$(field .error)" null
	# a syntax error is the cell's error too, and the session lives on
	run_in "$sid" 'x = ('
	assert_equal "$(field .error.name)" SyntaxError
	assert_equal "$(field .session.open)" true
}

@test "notebook: execution counts go 1, 2, 3 (a failing cell counts), and a restart starts them again" {
	session_new
	run_in "$sid" 'a = 1'
	assert_equal "$(field .executionCount)" 1
	run_in "$sid" '1/0'
	assert_equal "$(field .executionCount)" 2
	run_in "$sid" 'a + 1'
	assert_equal "$(field .executionCount)" 3
	run -0 jq -e '.outputs == [{"output_type": "execute_result", "data": {"text/plain": "2"},
		"metadata": {}, "execution_count": 3}] and .value == "2"' <<<"$reply"
	sreq POST "/sessions/$sid/restart"
	assert_equal "$code" 200
	run_in "$sid" 'print(1)'
	assert_equal "$(field .executionCount)" 1
}

@test "notebook: a DataFrame comes back as an HTML table; display() and IPython's display objects work, in order" {
	session_new
	run_in "$sid" 'import pandas as pd
df = pd.DataFrame({"city": ["Lyon", "Nice"], "price": [2.5, 3.0]})
print("first")
display(df)
from IPython.display import HTML, Markdown, JSON, display as idisplay
idisplay(Markdown("**bold**"))
print("between")
display(HTML("<i>x</i>"), JSON({"a": [1, 2]}))
class H:
    def _repr_html_(self):
        return "<b>h</b>"
    def __repr__(self):
        return "H()"
H()'
	assert_equal "$(field .status)" succeeded
	run -0 jq -c '[.outputs[] | .output_type]' <<<"$reply"
	assert_output '["stream","display_data","display_data","stream","display_data","display_data","execute_result"]'
	assert_equal "$(out 0 .text)" first
	assert_regex "$(out 1 '.data["text/html"]')" '<table border="1" class="dataframe">.*<td>Lyon</td>'
	assert_regex "$(out 1 '.data["text/plain"]')" 'city +price'
	assert_equal "$(out 2 '.data["text/markdown"]')" '**bold**'
	assert_equal "$(out 3 .text)" between
	assert_equal "$(out 4 '.data["text/html"]')" '<i>x</i>'
	run -0 jq -e '.outputs[5].data["application/json"] == {"a": [1, 2]}' <<<"$reply"
	run -0 jq -e '.outputs[6] | .data == {"text/plain": "H()", "text/html": "<b>h</b>"} and
		.execution_count == 1' <<<"$reply"
	# the lab contract's keys keep their meaning: value is the repr, stdout the text printed
	assert_equal "$(field .value)" "H()"
	assert_equal "$(field .stdout)" "first
between"
}

@test "notebook: a figure drawn and not shown comes back as an image/png output and as figure-N.png" {
	session_new
	run_in "$sid" 'import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [3, 1, 2])
plt.title("left open")
print("drawn")' '{artifacts: true}'
	assert_equal "$(field .status)" succeeded
	run -0 jq -c '[.outputs[] | .output_type]' <<<"$reply"
	assert_output '["stream","display_data"]'
	out 1 '.data["image/png"]' | base64 -d >"$BATS_TEST_TMPDIR/fig.png"
	run -0 file -b "$BATS_TEST_TMPDIR/fig.png"
	assert_regex "$output" '^PNG image data, [0-9]+ x [0-9]+'
	assert_regex "$(out 1 '.data["text/plain"]')" '^<Figure size [0-9]+x[0-9]+ with 1 Axes>$'
	run -0 jq -e '.artifacts | map(.path) | index("figure-1.png") != null' <<<"$reply"
	# shown with plt.show() in the middle of a cell: in its place among the outputs
	run_in "$sid" 'plt.plot([1, 2])
plt.show()
print("after")'
	run -0 jq -c '[.outputs[] | .output_type]' <<<"$reply"
	assert_output '["display_data","stream"]'
	# closed: nothing left to show
	run_in "$sid" 'fig = plt.figure(); plt.close(fig); print(1)'
	run -0 jq -c '[.outputs[] | .output_type]' <<<"$reply"
	assert_output '["stream"]'
}

@test "notebook: hostile display objects are bounded and cannot break the answer or another output" {
	session_new
	run_in "$sid" 'class Raises:
    def _repr_html_(self):
        raise RuntimeError("boom")
    def __repr__(self):
        return "Raises()"
class Lies:
    def _repr_html_(self):
        return 12345
    def _repr_png_(self):
        return "not base64 !!"
    def __repr__(self):
        return "Lies()"
class Huge:
    def _repr_html_(self):
        return "<p>" + "x" * (6 << 20)
    def __repr__(self):
        return "Huge()"
class Breaks:
    def _repr_html_(self):
        return "\"}]}\u0000\ud800 <script>"
    def __repr__(self):
        return "Breaks()"
class Bundle:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": "b", "../../etc": "x", "Text/HTML": "y", "image/png": 7}
display(Raises(), Lies(), Huge(), Breaks(), Bundle())
print("still here")'
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	# the five displays, in order, with what IPython's formatters report on stderr between
	# them (as a notebook shows it), and the print last
	run -0 jq -c '[.outputs[] | .output_type | select(. != "stream")]' <<<"$reply"
	assert_output '["display_data","display_data","display_data","display_data","display_data"]'
	reply=$(jq '.outputs as $o | .outputs = ($o | map(select(.output_type == "display_data"))) + [$o[-1]]' <<<"$reply")
	# a raising formatter: its text stays (IPython's formatter reports it on stderr)
	assert_equal "$(out 0 '.data | keys | join(",")')" text/plain
	assert_equal "$(out 0 '.data["text/plain"]')" "Raises()"
	# wrong types are left out; a str that is not base64 is no PNG
	assert_equal "$(out 1 '.data | keys | join(",")')" text/plain
	# larger than a representation's bound: left out, and named in the metadata
	assert_equal "$(out 2 '.data | keys | join(",")')" text/plain
	assert_equal "$(out 2 '.metadata.codebox.dropped[0].type')" text/html
	# quotes, NUL and a lone surrogate stay inside their string
	run -0 jq -e '.outputs[3].data["text/html"] | startswith("\"}]}") and endswith(" <script>")' <<<"$reply"
	# a bundle keeps only well-formed types of the right shape
	run -0 jq -e '.outputs[4].data == {"text/plain": "b"}' <<<"$reply"
	assert_equal "$(out 5 .text)" "still here"
	# a slow representation is bounded by the cell's timeout: interrupted, the session lives
	run_in "$sid" 'import time
class Slow:
    def _repr_html_(self):
        time.sleep(60)
Slow()' '{timeoutSeconds: 2}'
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .session.open)" true
	run_in "$sid" 'print("alive")'
	assert_equal "$(field .stdout)" alive
	# output past the cell's bound is left out, and says so; the answer stays JSON
	run_in "$sid" 'for i in range(40):
    display({"text/plain": "x" * (1 << 20)}, raw=True)'
	assert_equal "$code" 200
	run -0 jq -e '(.outputs | length) < 40 and
		(.outputs[-1].text | test("exceed [0-9]+ bytes and are left out"))' <<<"$reply"
}

@test "notebook: GET /sessions/{id}/notebook is an nbformat 4 notebook of the cells run, that nbformat validates" {
	session_new
	run_in "$sid" 'x = 21
print("x is", x)'
	run_in "$sid" 'import pandas as pd
pd.DataFrame({"a": [1]})'
	run_in "$sid" 'import matplotlib.pyplot as plt
plt.plot([1, 2])
1/0'
	sreq GET "/sessions/$sid/notebook"
	assert_equal "$code" 200
	printf '%s' "$reply" >"$BATS_TEST_TMPDIR/s.ipynb"
	run -0 /usr/bin/python3 -c '
import sys, nbformat
nb = nbformat.read(sys.argv[1], as_version=4)
nbformat.validate(nb)
print(len(nb.cells), [c.execution_count for c in nb.cells],
      [[o.output_type for o in c.outputs] for c in nb.cells])
print(nb.cells[0].source)' "$BATS_TEST_TMPDIR/s.ipynb"
	assert_line --index 0 "3 [1, 2, 3] [['stream'], ['execute_result'], ['error', 'display_data']]"
	assert_line --index 1 "x = 21"
	run -0 jq -e '.metadata.kernelspec.name == "python3" and .nbformat == 4' <<<"$reply"
	# another token's, or an unknown one: 404 as every session path
	sreq GET "/sessions/0123456789abcdef0123456789abcdef/notebook"
	assert_equal "$code" 404
	# a background execution joins it too
	sreq POST "/sessions/$sid/execute" '{"code": "print(\"bg\")", "background": true}'
	assert_equal "$code" 202
	local eid
	eid=$(field .execution)
	for _ in $(seq 100); do
		sreq GET "/sessions/$sid/executions/$eid"
		[[ $(field .state) == done ]] && break
		sleep 0.1
	done
	assert_equal "$(field .state)" done
	sreq GET "/sessions/$sid/notebook"
	run -0 jq -e '.cells | length == 4 and .[3].source == "print(\"bg\")" and
		.[3].outputs[0].text == "bg\n"' <<<"$reply"
	# a restart keeps the notebook, as Jupyter keeps the document
	sreq POST "/sessions/$sid/restart"
	run_in "$sid" 'print(2)'
	sreq GET "/sessions/$sid/notebook"
	run -0 jq -e '.cells | length == 5 and .[4].execution_count == 1' <<<"$reply"
}

@test "notebook: over MCP, a session cell's figure comes back as an image block" {
	local sid_mcp
	call 1 '{"code": "x = 3\nprint(x)", "session": "new"}'
	assert_equal "$code" 200
	sid_mcp=$(jq -r '.result.structuredContent.session.id // empty' <<<"$reply")
	[[ -n $sid_mcp ]] || sid_mcp=$(jq -r '.result.content[0].text' <<<"$reply" | grep -oE 'session: [0-9a-f-]+' | cut -d' ' -f2)
	echo "$sid_mcp" >>"$BATS_TEST_TMPDIR/sessions"
	call 2 "$(jq -cn --arg s "$sid_mcp" '{code: "import matplotlib.pyplot as plt\nplt.plot([1, x])\nprint(\"ok\")", session: $s}')"
	assert_equal "$code" 200
	run -0 jq -e '.result.content | map(.type) | index("image") != null' <<<"$reply"
	run -0 jq -e '.result.content[] | select(.type == "image") | .mimeType == "image/png"' <<<"$reply"
	# and the call is in the session's notebook
	sreq GET "/sessions/$sid_mcp/notebook"
	run -0 jq -e '.cells | length == 2' <<<"$reply"
}

@test "notebook: over MCP, the sessions tool lists the caller's sessions and closes one" {
	local a b
	mcp '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
	run -0 jq -e '.result.tools[1] | .name == "sessions" and
		.inputSchema.properties.action.enum == ["list", "close"] and
		(.description | test("close a session once you no longer need"))' <<<"$reply"
	session_new
	a=$sid
	session_new
	b=$sid
	mcp '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sessions","arguments":{"action":"list"}}}'
	run -0 jq -e --arg a "$a" --arg b "$b" '.result.structuredContent.sessions | map(.id) |
		index($a) != null and index($b) != null' <<<"$reply"
	assert_regex "$(jq -r '.result.content[0].text' <<<"$reply")" "$a: idle, 0 cells run"
	mcp "$(jq -cn --arg s "$a" '{jsonrpc: "2.0", id: 3, method: "tools/call",
		params: {name: "sessions", arguments: {action: "close", session: $s}}}')"
	assert_equal "$(jq -r '.result.content[0].text' <<<"$reply")" "session $a closed"
	sreq GET "/sessions/$a"
	assert_equal "$code" 404
	sreq GET "/sessions/$b"
	assert_equal "$code" 200
	# closing it again, or an id that is no session: a tool error the model can read
	mcp "$(jq -cn --arg s "$a" '{jsonrpc: "2.0", id: 4, method: "tools/call",
		params: {name: "sessions", arguments: {action: "close", session: $s}}}')"
	run -0 jq -e '.result.isError == true and (.result.content[0].text | test("no such session"))' <<<"$reply"
	mcp '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sessions","arguments":{"action":"drop"}}}'
	run -0 jq -e '.result.isError == true' <<<"$reply"
}
