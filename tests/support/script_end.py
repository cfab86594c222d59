"""A script's run in this process, ended as Python ends a script: for the tests that read a driver's or a tool's exit
status and its one-line error (in capsys) without starting a process, whose imports alone cost seconds."""
from __future__ import annotations

import sys
import warnings
from typing import Callable

# the warnings filters of a `python` started without -W or PYTHONWARNINGS (the warnings module's documentation,
# "Default Warning Filter"), first to last; every other warning is shown once per place it is issued from
PYTHON_DEFAULT_FILTERS = [('default', DeprecationWarning, '__main__'), ('ignore', DeprecationWarning, ''),
                          ('ignore', PendingDeprecationWarning, ''), ('ignore', ImportWarning, ''),
                          ('ignore', ResourceWarning, '')]


def script_exit(script: Callable[[], object]) -> tuple[object, list[warnings.WarningMessage]]:
    """Call `script` (a script's code, which installs its own hooks, e.g. `friendly_errors`) and end as Python does:
    an exception it raises is given to `sys.excepthook`. Returns the exit status (0 when it returns, else the code of
    the SystemExit it or the hook raises) and the warnings that `python` would show it issue (its default filters,
    not pytest's; those this process showed once already included). The hooks are put back afterwards. An exception
    the hook does not end with (a traceback, status 1) is raised again."""
    saved = sys.excepthook, warnings.showwarning
    try:
        with warnings.catch_warnings(record=True) as caught:  # the filters put back on leaving
            warnings.resetwarnings()
            for action, category, module in reversed(PYTHON_DEFAULT_FILTERS):  # each goes in front of the others
                warnings.filterwarnings(action, category=category, module=module)
            try:
                script()
                return 0, caught
            except SystemExit as e:
                return e.code, caught
            except Exception as e:
                try: sys.excepthook(type(e), e, e.__traceback__)
                except SystemExit as end: return end.code, caught
                raise
    finally:
        sys.excepthook, warnings.showwarning = saved
