# codebox: a session's program (fcgi/core/sessionproto.h), run by the warm interpreter that holds
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
            # a snapshot, a restore (_cell_kinds, below)
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


# ---- a session's snapshot and restore (sessionproto.h's cell kinds 2 and 3), run by the
# session's program as a cell of another kind than code (_cell_other())

_cell_kinds = {}

# what a snapshot never carries, by kind: the reason told in "skipped"
_SNAP_NOT = (
    ('generator', 'a generator: its running frame cannot be saved'),
    ('coroutine', 'a coroutine: its running frame cannot be saved'),
    ('async_generator', 'an async generator: its running frame cannot be saved'),
    ('frame', 'a frame: execution state cannot be saved'),
    ('socket', 'an open socket: the connection cannot be carried to another process'),
    ('file', 'an open file: a handle cannot be carried; its file is kept if it is in the '
             'working directory'),
    ('lock', 'a lock: its holder does not exist in the restored session'),
    ('thread', 'a thread: a running thread cannot be saved'),
)

def _snap_why(v):
    # the reason v is never carried, or None
    import io, socket, threading, types, _thread
    kinds = {
        'generator': types.GeneratorType, 'coroutine': types.CoroutineType,
        'async_generator': types.AsyncGeneratorType, 'frame': types.FrameType,
        'socket': socket.socket, 'file': io.IOBase,
        'lock': (_thread.LockType, _thread.RLock, threading.Condition,
                 threading.Semaphore, threading.Event, threading.Barrier),
        'thread': threading.Thread}
    for k, why in _SNAP_NOT:
        if isinstance(v, kinds[k]):
            return why
    return None

class _SnapFull(Exception):
    pass

class _SnapSink:
    # a bounded writer: raises _SnapFull past max bytes; f None counts only
    def __init__(self, f, limit):
        self.f, self.limit, self.n = f, limit, 0
    def write(self, b):
        self.n += len(b)
        if self.n > self.limit:
            raise _SnapFull()
        if self.f is not None:
            self.f.write(b)
        return len(b)

def _snap_files(workdir, limit, skipped):
    # the working directory's regular files and directories (no symlinks, no specials), but
    # the cell's own main.py and result.json: [(path, mode, bytes or None)], their bytes
    import os, stat
    out, total = [], 0
    for top, dirs, files in os.walk(workdir, followlinks=False):
        rel = os.path.relpath(top, workdir)
        for name in sorted(dirs) + sorted(files):
            p = os.path.join(top, name)
            r = os.path.normpath(os.path.join(rel, name))
            if rel == '.' and name in ('main.py', 'result.json'):
                continue
            st = os.lstat(p)
            if stat.S_ISDIR(st.st_mode):
                out.append((r, stat.S_IMODE(st.st_mode), None))
            elif stat.S_ISREG(st.st_mode):
                total += st.st_size
                if total > limit:
                    raise _SnapFull()
                with open(p, 'rb') as f:
                    out.append((r, stat.S_IMODE(st.st_mode), f.read(limit + 1)))
            else:
                kind = 'a symlink' if stat.S_ISLNK(st.st_mode) else 'not a regular file'
                skipped.append({'name': 'file:' + r, 'reason': kind + ': not kept'})
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(top, d))]
    return out, total

def _snap_state(main, skipped):
    # __main__'s names: modules (kept by name), the rest to pickle, what is never carried
    import types
    mods, values = {}, {}
    for k, v in list(main.items()):
        if k.startswith('__') and k.endswith('__'):
            continue
        if isinstance(v, types.ModuleType):
            mods[k] = v.__name__
            continue
        why = _snap_why(v)
        if why is not None:
            skipped.append({'name': k, 'reason': why})
            continue
        values[k] = v
    return mods, values

def _snap_dump(f, limit, doc):
    import dill, pickle
    dill.dump(doc, _SnapSink(f, limit), protocol=pickle.HIGHEST_PROTOCOL)

def snapshot(fd, limit, main, workdir):
    # the session's state, pickled by dill into fd (a memfd) within limit bytes: __main__'s
    # values (functions and classes defined in it by value), its modules by name, the working
    # directory's files and the current directory. Returns (code, summary): 0 and what was
    # kept, 2 (too large) or 1 with an error.
    import io, json, os, sys
    skipped = []
    try:
        import dill
    except ImportError:
        return 1, {'error': 'dill (python3-dill) is not installed'}
    try:
        files, total = _snap_files(workdir, limit, skipped)
        mods, values = _snap_state(main, skipped)
        cwd = os.getcwd()
        rel = os.path.relpath(cwd, workdir)
        doc = {'format': 1, 'python': list(sys.version_info[:2]), 'modules': mods,
               'files': files,
               'cwd': rel if not rel.startswith('..') else cwd}
        with io.open(fd, 'wb', closefd=False) as f:
            try:
                _snap_dump(f, limit, dict(doc, values=values))
            except (_SnapFull, KeyboardInterrupt, MemoryError):
                raise
            except BaseException:
                # one of them cannot be pickled: found one by one, then the rest again
                for k in list(values):
                    try:
                        _snap_dump(None, limit, values[k])
                    except (_SnapFull, KeyboardInterrupt, MemoryError):
                        raise
                    except BaseException as e:
                        del values[k]
                        skipped.append({'name': k, 'reason': 'cannot be pickled: %s: %s'
                                        % (type(e).__name__, str(e)[:200])})
                f.seek(0)
                f.truncate()
                _snap_dump(f, limit, dict(doc, values=values))
            f.flush()
            n = f.tell()
    except _SnapFull:
        return 2, {'error': 'the session is larger than the snapshot bound of %d bytes' % limit}
    except KeyboardInterrupt:
        return 1, {'error': 'the snapshot was interrupted (its time bound)'}
    except BaseException as e:
        return 1, {'error': 'the snapshot failed: %s: %s' % (type(e).__name__, str(e)[:300])}
    return 0, {'payloadBytes': n, 'variables': sorted(values), 'modules': sorted(mods),
               'files': sum(1 for f in files if f[2] is not None),
               'fileBytes': total, 'cwd': doc['cwd'], 'skipped': skipped}

def _restore_path(workdir, r):
    import os
    if os.path.isabs(r) or '..' in r.split('/') or r in ('', '.'):
        raise ValueError('a path out of the working directory: %r' % r)
    return os.path.join(workdir, r)

def restore(fd, limit, main, workdir):
    # a snapshot (fd: a sealed memfd the worker checked) loaded into this fresh session: the
    # files first, then the current directory, the modules and the values. Returns (code,
    # summary).
    import importlib, io, os, sys
    skipped = []
    try:
        import dill
        with io.open(fd, 'rb', closefd=False) as f:
            f.seek(0)
            doc = dill.load(f)
        if not isinstance(doc, dict) or doc.get('format') != 1:
            return 1, {'error': 'not a snapshot of this format'}
        dirs = []
        for r, mode, data in doc['files']:
            p = _restore_path(workdir, r)
            if data is None:
                os.makedirs(p, mode=0o700, exist_ok=True)
                dirs.append((p, mode))
                continue
            fd2 = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
                          | os.O_CLOEXEC, 0o600)
            with io.open(fd2, 'wb') as out:
                out.write(data)
            os.chmod(p, mode & 0o777)
        for p, mode in reversed(dirs):
            # once their files are in
            os.chmod(p, mode & 0o777)
        cwd = doc['cwd']
        try:
            os.chdir(cwd if os.path.isabs(cwd) else os.path.join(workdir, cwd))
        except OSError as e:
            skipped.append({'name': 'cwd', 'reason': 'cannot enter %s: %s' % (cwd, e.strerror)})
        mods = []
        for k, name in doc['modules'].items():
            try:
                main[k] = importlib.import_module(name)
                mods.append(k)
            except BaseException as e:
                skipped.append({'name': k, 'reason': 'import %s failed: %s: %s'
                                % (name, type(e).__name__, str(e)[:200])})
        main.update(doc['values'])
    except KeyboardInterrupt:
        return 1, {'error': 'the restore was interrupted (its time bound)'}
    except BaseException as e:
        return 1, {'error': 'the snapshot could not be loaded: %s: %s'
                   % (type(e).__name__, str(e)[:300])}
    return 0, {'variables': sorted(doc['values']), 'modules': sorted(mods),
               'files': sum(1 for f in doc['files'] if f[2] is not None),
               'cwd': doc['cwd'], 'skipped': skipped}

_cell_kinds[2] = snapshot
_cell_kinds[3] = restore

def _cell_other(sock, kind, fds, limit, blob_max, main, workdir):
    # a cell of another kind than code (enum session_cell_kind): fds are its memfd, stdout
    # and stderr; the answer is the code cell's, with a JSON summary as its value. SIGINT
    # (its deadline) is let through while it works, as a code cell's is
    import json, os, signal, struct
    sigint = {signal.SIGINT}
    code, summary = 1, {'error': 'no such kind of cell: %d' % kind}
    fn = _cell_kinds.get(kind)
    try:
        if fn is not None:
            try:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
                code, summary = fn(fds[0], blob_max if kind == 2 else 0, main, workdir)
            finally:
                signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
    except KeyboardInterrupt:
        code, summary = 1, {'error': 'interrupted (its time bound)'}
    signal.sigtimedwait(sigint, 0)
    for f in fds:
        os.close(f)
    b = json.dumps(summary).encode()
    sk = summary.get('skipped') or []
    while len(b) > limit and sk:
        # the summary's bound: its list of what was skipped is cut, and says so
        sk = sk[:len(sk) // 2]
        summary['skipped'] = sk + [{'name': '...', 'reason': 'more than this summary holds'}]
        b = json.dumps(summary).encode()
    if len(b) > limit:
        b = json.dumps({k: summary[k] for k in ('error', 'payloadBytes') if k in summary}).encode()
    sock.send(struct.pack('<iII', code, 1, len(b)) + b)
