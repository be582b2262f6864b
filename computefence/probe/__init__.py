"""The probe, kept as parts and sent as one script.

Each module here is a part: standard library only, Python 3.8 syntax. But assemble.py, which
is no part (it runs on the client, strictly typed, standard library only too, and is never
joined): it joins the parts in its PARTS order into the one script that runs on a pod (`python3 -`) and that `computefence probe
--print` prints. A part names what it uses from earlier parts with
a relative import (`from .core import _text`): on the laptop that is an ordinary import; in
the script the assembler drops those lines and the names are already the script's globals.
So a part may only import from parts before it, and top-level names must not clash.

A new collector area: a module with collect_<area>(params), its place in assemble.PARTS (before
"collectors"), its row in collectors.COLLECTORS and its timeout in core.DEFAULT_TIMEOUTS.

Parts are sent by need: a part listed in assemble.PART_NEEDS goes into the script
only when the probe parameters ask for it (the dataset scanner's four parts only with a
dataset). In a script without it, the names the collectors part imports from it are None, and
COLLECTORS leaves that collector out.
"""
