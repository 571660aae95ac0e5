/*
 * figures.c - the Python hook figures.h describes.
 */
#include "core/figures.h"

#define FIGURES_SOURCE                                                                             \
	"# codebox: matplotlib draws with Agg from a font cache built ahead, and every figure a\n" \
	"# program shows or leaves open is saved as figure-N.png in its working directory.\n"      \
	"import sys as _sys\n"                                                                     \
	"\n"                                                                                       \
	"_CACHE = '" FIGURES_CACHE_DIR "'\n"                                                       \
	"_saved = [0]\n"                                                                           \
	"# called with each figure's file and the figure once saved (a session shows it)\n"        \
	"_on_saved = []\n"                                                                         \
	"\n"                                                                                       \
	"def _config_dir():\n"                                                                     \
	"    # the cache itself where it is writable (a warm pool's zygote); else a copy in the\n" \
	"    # run's private /tmp (the cache is read-only there, and matplotlib wants to write)\n" \
	"    import os\n"                                                                          \
	"    if os.access(_CACHE, os.W_OK):\n"                                                     \
	"        return _CACHE\n"                                                                  \
	"    d = '/tmp/.codebox-matplotlib'\n"                                                     \
	"    try:\n"                                                                               \
	"        os.makedirs(d, exist_ok=True)\n"                                                  \
	"        for n in os.listdir(_CACHE):\n"                                                   \
	"            if n.startswith('fontlist-') and not os.path.exists(os.path.join(d, n)):\n"   \
	"                with open(os.path.join(_CACHE, n), 'rb') as i, \\\n"                      \
	"                        open(os.path.join(d, n), 'wb') as o:\n"                           \
	"                    o.write(i.read())\n"                                                  \
	"    except OSError:\n"                                                                    \
	"        pass\n"                                                                           \
	"    return d\n"                                                                           \
	"\n"                                                                                       \
	"def _save_figures():\n"                                                                   \
	"    # each open figure as the next free figure-N.png in the working directory (HOME),\n"  \
	"    # then closed, as a notebook shows a figure once\n"                                   \
	"    import os\n"                                                                          \
	"    pyplot = _sys.modules.get('matplotlib.pyplot')\n"                                     \
	"    if pyplot is None:\n"                                                                 \
	"        return\n"                                                                         \
	"    try:\n"                                                                               \
	"        from matplotlib._pylab_helpers import Gcf\n"                                      \
	"        home = os.environ.get('HOME', '')\n"                                              \
	"        where = home if os.path.isabs(home) and os.path.isdir(home) else os.getcwd()\n"   \
	"        for manager in Gcf.get_all_fig_managers():\n"                                     \
	"            while True:\n"                                                                \
	"                _saved[0] += 1\n"                                                         \
	"                name = os.path.join(where, 'figure-%d.png' % _saved[0])\n"                \
	"                if not os.path.lexists(name):\n"                                          \
	"                    break\n"                                                              \
	"            manager.canvas.figure.savefig(name, format='png')\n"                          \
	"            for f in _on_saved:\n"                                                        \
	"                f(name, manager.canvas.figure)\n"                                         \
	"        pyplot.close('all')\n"                                                            \
	"    except Exception as e:\n"                                                             \
	"        print('codebox: saving the open figures failed: %r' % (e,), file=_sys.stderr)\n"  \
	"\n"                                                                                       \
	"def _show(*args, **kwargs):\n"                                                            \
	"    _save_figures()\n"                                                                    \
	"\n"                                                                                       \
	"def _loaded(name, module):\n"                                                             \
	"    import atexit\n"                                                                      \
	"    if name == 'matplotlib.pyplot':\n"                                                    \
	"        _show.__doc__ = module.show.__doc__\n"                                            \
	"        module.show = _show\n"                                                            \
	"        # after pyplot's own exit handlers, so it runs before them\n"                     \
	"        atexit.register(_save_figures)\n"                                                 \
	"\n"                                                                                       \
	"class _Finder:\n"                                                                         \
	"    @classmethod\n"                                                                       \
	"    def find_spec(cls, name, path=None, target=None):\n"                                  \
	"        if name not in ('matplotlib', 'matplotlib.pyplot'):\n"                            \
	"            return None\n"                                                                \
	"        import importlib.machinery, os\n"                                                 \
	"        spec = importlib.machinery.PathFinder.find_spec(name, path)\n"                    \
	"        if spec is None or not hasattr(spec.loader, 'exec_module'):\n"                    \
	"            return spec\n"                                                                \
	"        inner = spec.loader.exec_module\n"                                                \
	"        def exec_module(module):\n"                                                       \
	"            if name != 'matplotlib':\n"                                                   \
	"                inner(module)\n"                                                          \
	"                _loaded(name, module)\n"                                                  \
	"                return\n"                                                                 \
	"            # matplotlib reads its config and cache directories from the environment\n"   \
	"            # once: set for the import only, the run's environment stays as it was\n"     \
	"            had = 'MPLCONFIGDIR' in os.environ\n"                                         \
	"            if not had:\n"                                                                \
	"                os.environ['MPLCONFIGDIR'] = _config_dir()\n"                             \
	"            try:\n"                                                                       \
	"                inner(module)\n"                                                          \
	"                module.get_cachedir()\n"                                                  \
	"            finally:\n"                                                                   \
	"                if not had:\n"                                                            \
	"                    os.environ.pop('MPLCONFIGDIR', None)\n"                               \
	"            if 'MPLBACKEND' not in os.environ:\n"                                         \
	"                module.rcParams['backend'] = 'agg'\n"                                     \
	"        spec.loader.exec_module = exec_module\n"                                          \
	"        return spec\n"                                                                    \
	"\n"                                                                                       \
	"def install():\n"                                                                         \
	"    if not any(f is _Finder for f in _sys.meta_path):\n"                                  \
	"        _sys.meta_path.insert(0, _Finder)\n"

const char figures_source[] = FIGURES_SOURCE;

const char figures_sitecustomize[] = FIGURES_SOURCE "\ninstall()\n";
