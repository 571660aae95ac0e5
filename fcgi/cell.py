# codebox: a session's program (fcgi/sessionproto.h), run by the warm interpreter that holds
# the session (interp.c embeds this file as cell_source and runs it once, in the namespace of
# its entry functions, in the zygote: no run's code has executed yet).
#
# Cells run one after another in one __main__, as a notebook's kernel runs them. Init sends a
# request: a cell (main.py is its code) with stdin, stdout and stderr. The answer is the exit
# code, the repr of a final expression whose value is not None (cut at the bound init gave),
# and, in a memfd, the cell as Jupyter's nbformat 4 has it: its execution count, its outputs
# in the order the program made them (stream text written through sys.stdout and sys.stderr,
# display() and IPython's display objects, the final expression, the figures it showed or
# left open, a failing cell's error) and its error as E2B and Daytona give it. Everything
# here runs inside the session's sandbox; the worker checks the whole of it again.
#
# SIGINT (the deadline's, an interrupt's) is blocked but while the cell's own code runs, so
# that it never lands in this loop; one that arrives late is dropped before the answer.

# what one cell's outputs may hold, in bytes of JSON (the worker's bound is SESSION_CELL_MAX:
# sessionproto.h); past it, the rest of the cell's outputs is left out, and says so
_CELL_MAX = 8 << 20
# one MIME representation's largest (a bigger one is left out of its bundle, and said so)
_MIME_MAX = 4 << 20
# stream text kept in the outputs, per cell (stdout and stderr themselves have their own caps)
_STREAM_MAX = 1 << 20
# the MIME types a bundle keeps, as Jupyter's notebook renders them
_MIMES = ('text/plain', 'text/html', 'text/markdown', 'text/latex', 'image/png', 'image/jpeg',
          'image/svg+xml', 'application/json', 'application/pdf')
_BINARY = ('image/png', 'image/jpeg', 'application/pdf')
# values whose text is their repr(), with no richer form
_PLAIN = (int, float, bool, complex, str, bytes, type(None))


class _Cell:
    # the outputs of the cell that runs, in order, within _CELL_MAX
    def __init__(self):
        self.outputs = []
        self.size = 0
        self.stream = 0
        self.full = False

    def _fits(self, n):
        if self.full:
            return False
        if self.size + n > _CELL_MAX:
            self.full = True
            self.outputs.append({'output_type': 'stream', 'name': 'stderr',
                                 'text': 'codebox: the cell\'s further outputs exceed %d bytes '
                                         'and are left out\n' % _CELL_MAX})
            return False
        self.size += n
        return True

    def text(self, name, s):
        if not isinstance(s, str) or not s or self.stream >= _STREAM_MAX:
            return
        s = s[:_STREAM_MAX - self.stream]
        self.stream += len(s)
        if self.stream >= _STREAM_MAX:
            s += '\n[codebox: the rest of %s is left out of the outputs]\n' % name
        if not self._fits(len(s) * 2 + 64):
            return
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last['output_type'] == 'stream' and last['name'] == name:
            last['text'] += s
        else:
            self.outputs.append({'output_type': 'stream', 'name': name, 'text': s})

    def bundle(self, kind, data, metadata, count=None):
        size = sum(len(v) if isinstance(v, str) else 1024 for v in data.values())
        if not self._fits(size + 128):
            return
        o = {'output_type': kind, 'data': data, 'metadata': metadata}
        if kind == 'execute_result':
            o['execution_count'] = count
        self.outputs.append(o)

    def error(self, name, value, tb):
        self._fits(sum(len(t) for t in tb) + len(value) + 128)
        self.outputs.append({'output_type': 'error', 'ename': name, 'evalue': value,
                             'traceback': tb})


_cell = [None]


class _Stream:
    # sys.stdout or sys.stderr while a cell runs: what is written goes to the real stream (the
    # worker's pipe) and, in order, into the cell's outputs. Everything else is the real
    # stream's (fileno, buffer, encoding...): bytes written below it (os.write, a
    # subprocess) reach stdout and stderr as ever, not the outputs
    def __init__(self, real, name):
        object.__setattr__(self, '_real', real)
        object.__setattr__(self, '_name', name)

    def write(self, s):
        n = self._real.write(s)
        c = _cell[0]
        if c is not None:
            c.text(self._name, s)
        return n

    def writelines(self, lines):
        for s in lines:
            self.write(s)

    def __getattr__(self, name):
        return getattr(self._real, name)

    def __setattr__(self, name, value):
        setattr(self._real, name, value)

    def __iter__(self):
        return iter(self._real)


_formatter = [None]


def _bundle(obj, include=None, exclude=None):
    # obj's MIME bundle and metadata, as IPython's display layer makes them (its formatters
    # catch what a _repr_*_ method raises or returns of the wrong type); its text/plain alone
    # where IPython is missing
    if type(obj) in _PLAIN:
        # what IPython's pretty printer gives them too, without importing it
        return {'text/plain': repr(obj)}, {}
    f = _formatter[0]
    if f is None:
        try:
            from IPython.core.formatters import DisplayFormatter
            f = _formatter[0] = DisplayFormatter()
        except Exception:
            _formatter[0] = False
    if f:
        data, md = f.format(obj, include=include, exclude=exclude)
    else:
        data, md = {'text/plain': repr(obj)}, {}
    return _clean(data, md)


def _clean(data, md):
    # what a notebook keeps: the known types, text as str, binary as base64, JSON as JSON;
    # anything larger than _MIME_MAX or of another shape is left out, and named in the
    # metadata
    import base64, json
    out, dropped = {}, []
    for k, v in (data or {}).items():
        if k not in _MIMES:
            continue
        try:
            if k in _BINARY:
                if isinstance(v, str):
                    # already base64, as Jupyter takes a str: checked, kept as it is
                    if len(v) > _MIME_MAX:
                        raise ValueError('larger than %d bytes' % _MIME_MAX)
                    base64.b64decode(v.encode('ascii'), validate=True)
                elif isinstance(v, (bytes, bytearray, memoryview)):
                    if len(v) > _MIME_MAX * 3 // 4:
                        raise ValueError('larger than %d bytes' % _MIME_MAX)
                    v = base64.b64encode(bytes(v)).decode('ascii')
                else:
                    raise TypeError(type(v).__name__)
            elif k == 'application/json':
                s = json.dumps(v)
                if len(s) > _MIME_MAX:
                    raise ValueError('larger than %d bytes' % _MIME_MAX)
                v = json.loads(s)
            else:
                if isinstance(v, list):
                    v = ''.join(v)
                if not isinstance(v, str):
                    raise TypeError(type(v).__name__)
                if len(v) > _MIME_MAX:
                    raise ValueError('larger than %d bytes' % _MIME_MAX)
            out[k] = v
        except Exception as e:
            dropped.append({'type': k, 'reason': ('%s: %s' % (type(e).__name__, e))[:200]})
    meta = {}
    if isinstance(md, dict):
        try:
            meta = json.loads(json.dumps(md))
            if not isinstance(meta, dict) or len(json.dumps(meta)) > 65536:
                meta = {}
        except Exception:
            meta = {}
    if dropped:
        meta['codebox'] = {'dropped': dropped}
    if 'text/plain' not in out:
        out['text/plain'] = '<%d representations left out>' % len(dropped) if dropped else ''
    return out, meta


def display(*objs, include=None, exclude=None, metadata=None, transient=None,
            display_id=None, raw=False, clear=False, **kwargs):
    """Shows each object in the cell's outputs, as Jupyter's display() does: its richest
    representations (HTML, Markdown, LaTeX, PNG, SVG, JSON) with its text."""
    c = _cell[0]
    for obj in objs:
        if raw:
            data, md = _clean(obj if isinstance(obj, dict) else {}, metadata or {})
        else:
            data, md = _bundle(obj, include, exclude)
            if isinstance(metadata, dict):
                md.update(metadata)
        if c is not None:
            for f in (_out, _err):
                try:
                    f._real.flush()
                except Exception:
                    pass
            c.bundle('display_data', data, md)
        else:
            print(data.get('text/plain', ''))


def _figure_shown(path, figure):
    # a figure saved by figures.c's hook (plt.show(), or left open at the cell's end): a PNG
    # display output too, as Jupyter's inline backend shows it
    c = _cell[0]
    if c is None:
        return
    try:
        with open(path, 'rb') as f:
            png = f.read(_MIME_MAX)
        data, md = _clean({'image/png': png, 'text/plain': repr(figure)}, {})
        c.bundle('display_data', data, md)
    except Exception:
        pass


def _hook_display():
    # display() as a builtin, and IPython's own display() made this one (IPython's needs a
    # running shell: without one it prints); figures shown or left open come back
    import builtins, sys
    builtins.display = display
    # (not the IPython package's: its "display" is the submodule IPython.display)
    for name in ('IPython.core.display_functions', 'IPython.core.display', 'IPython.display'):
        m = sys.modules.get(name)
        if m is not None and hasattr(m, 'display'):
            m.display = display
    fig = globals().get('_figures')
    if isinstance(fig, dict):
        fig['_on_saved'][:] = [_figure_shown]


class _DisplayFinder:
    # IPython's display() made this one when a cell imports IPython's display layer first
    # (where the template did not preload it): IPython.display takes its display from here
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != 'IPython.core.display_functions':
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or not hasattr(spec.loader, 'exec_module'):
            return spec
        inner = spec.loader.exec_module

        def exec_module(module):
            inner(module)
            module.display = display
        spec.loader.exec_module = exec_module
        return spec


def _error(e, tb, path):
    # the error as E2B and Daytona give it, its traceback as the interpreter prints it from
    # the cell's frames on
    import traceback
    try:
        lines = traceback.format_exception(type(e), e, tb)
        value = str(e)
    except Exception:
        lines, value = [], ''
    return {'name': type(e).__name__, 'value': value,
            'traceback': [s.rstrip('\n') for s in lines]}


def _send_cell(sock, code, value, limit, count, error):
    # the answer: exit code and value in the message, the cell's JSON in a memfd
    import json, os, socket, struct
    c = _cell[0]
    doc = {'executionCount': count, 'outputs': c.outputs if c else [], 'error': error}
    try:
        body = json.dumps(doc, ensure_ascii=False).encode('utf-8', 'replace')
    except Exception as e:
        body = json.dumps({'executionCount': count, 'outputs': [], 'error': error,
                           'note': 'the outputs could not be encoded: %r' % (e,)}).encode()
    b = b''
    if value is not None:
        b = value.encode('utf-8', 'backslashreplace')
        if len(b) > limit:
            b = b[:limit].decode('utf-8', 'ignore').encode('utf-8')
    fds = []
    try:
        m = os.memfd_create('codebox-cell', os.MFD_CLOEXEC)
        os.write(m, body)
        fds = [m]
    except OSError:
        pass
    msg = struct.pack('<iII', code, value is not None, len(b)) + b
    try:
        while True:
            try:
                socket.send_fds(sock, [msg], fds)
                break
            except InterruptedError:
                continue
    finally:
        for f in fds:
            os.close(f)


_out = None
_err = None


def session(fd, workdir):
    import ast, io, os, signal, socket, struct, sys
    global _out, _err
    sock = socket.socket(fileno=fd)
    main = sys.modules['__main__'].__dict__
    path = os.path.join(workdir, 'main.py')
    main['__file__'] = path
    null = os.open(os.devnull, os.O_RDWR)
    for n in (0, 1, 2):
        os.dup2(null, n)
    sigint = {signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
    _out, _err = _Stream(sys.stdout, 'stdout'), _Stream(sys.stderr, 'stderr')
    sys.stdout = _out
    sys.stderr = _err
    sys.meta_path.insert(0, _DisplayFinder)
    if 'IPython.core.formatters' in sys.modules:
        _bundle(None)  # IPython's formatters made now (preloaded), before any cell's time
    count = 0
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 64, 3)
        except InterruptedError:
            continue
        if len(msg) != 16 or len(fds) != 3:
            for f in fds:
                os.close(f)
            if not msg:
                os._exit(0)
            continue
        _, limit, kind, blob_max = struct.unpack('<IIII', msg)
        if kind != 1:
            # a snapshot, a restore (interp.c's _cell_kinds)
            _cell_other(sock, kind, fds, limit, blob_max, main, workdir)
            continue
        for n, f in enumerate(fds):
            os.dup2(f, n)
            os.close(f)
        sys.stdin = io.TextIOWrapper(io.open(0, 'rb', closefd=False), 'utf-8', 'strict')
        # a cell that replaced them (sys.stdout = ...) has them back for the next one
        sys.stdout, sys.stderr = _out, _err
        # display() as IPython's too, its modules imported by now or by an earlier cell
        _hook_display()
        count += 1
        _cell[0] = _Cell()
        code, value, error = 0, None, None
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
                with open(path, 'rb') as f:
                    src = f.read()
                tree = compile(src, path, 'exec', ast.PyCF_ONLY_AST)
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, path, 'exec'), main)
                if last is not None:
                    v = eval(compile(last, path, 'eval'), main)
                    if v is not None:
                        value = repr(v)
                        data, md = _bundle(v)
                        _cell[0].bundle('execute_result', data, md, count)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
        except SystemExit as e:
            c = e.code
            if c is None:
                code = 0
            elif isinstance(c, int):
                code = c & 0xff
            else:
                print(c, file=sys.stderr)
                code = 1
        except BaseException as e:
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != path:
                tb = tb.tb_next
            error = _error(e, tb, path)
            # stderr has the traceback as the interpreter prints it (not the outputs: the
            # error output holds it)
            try:
                _print_error(e, tb)
            except BaseException:
                pass
            _cell[0].error(error['name'], error['value'], error['traceback'])
            code = 1
        try:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
                _figures_left()
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
        except BaseException:
            pass
        signal.sigtimedwait(sigint, 0)
        for f in (sys.stdout, sys.stderr, _out, _err):
            try:
                f.flush()
            except BaseException:
                pass
        for n in (0, 1, 2):
            os.dup2(null, n)
        _send_cell(sock, code, value, limit, count, error)
        _cell[0] = None


def _print_error(e, tb):
    # the excepthook's text to the real stderr alone, when the cell left sys.stderr as it was
    import sys
    if sys.stderr is not _err:
        sys.excepthook(type(e), e.with_traceback(tb), tb)
        return
    sys.stderr = _err._real
    try:
        sys.excepthook(type(e), e.with_traceback(tb), tb)
    finally:
        sys.stderr = _err


def _figures_left():
    # the figures a cell left open, saved and shown at its end (as a notebook shows them)
    import sys
    if 'matplotlib.pyplot' not in sys.modules:
        return
    fig = globals().get('_figures')
    if isinstance(fig, dict):
        fig['_save_figures']()
