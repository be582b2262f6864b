# A pip for the test pods, ahead of the real one on sys.path (the stdlib folder comes first):
# installs torch from the recorded builds in /opt/computefence-fakes/builds/<index tag>, and any
# other package as its bare dist-info; no network, as on a pod with a local mirror.
import os
import re
import shutil
import sys

SITE = "/opt/computefence-fakes/site-packages"
BUILDS = "/opt/computefence-fakes/builds"
PTH = "/usr/lib/python3/dist-packages/computefence-fakes.pth"


def _remove(name):
    for entry in os.listdir(SITE) if os.path.isdir(SITE) else []:
        if entry == name or re.match(re.escape(name) + r"-[^-]+\.dist-info$", entry):
            path = os.path.join(SITE, entry)
            shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)


def main(args):
    if args[:2] == ["uninstall", "-y"]:
        for name in args[2:]:
            _remove(name)
        return 0
    if not args or args[0] != "install":
        print("shim pip: only install and uninstall -y", file=sys.stderr)
        return 2
    index = args[args.index("--index-url") + 1] if "--index-url" in args else None
    os.makedirs(SITE, exist_ok=True)
    for requirement in [a for a in args[1:] if not a.startswith("-") and a != index]:
        name = re.split(r"[<>=!~ \[]", requirement, maxsplit=1)[0]
        if name == "torch":
            build = os.path.join(BUILDS, (index or "/cu124").rstrip("/").rsplit("/", 1)[-1])
            if not os.path.isdir(build):
                print("ERROR: No matching distribution found for " + requirement, file=sys.stderr)
                return 1
            _remove("torch")
            for entry in os.listdir(build):
                shutil.copytree(os.path.join(build, entry), os.path.join(SITE, entry))
        else:
            version = (re.findall(r"[0-9][0-9a-zA-Z.]*", requirement) or ["1.0"])[0]
            _remove(name)
            info = os.path.join(SITE, name + "-" + version + ".dist-info")
            os.makedirs(info)
            with open(os.path.join(info, "METADATA"), "w") as fh:
                fh.write("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
        print("Successfully installed " + requirement)
    with open(PTH, "w") as fh:
        fh.write(SITE + "\n")
    return 0


sys.exit(main(sys.argv[1:]))
