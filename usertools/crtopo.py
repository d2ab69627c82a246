# SPDX-License-Identifier: BSD-3-Clause
"""The machine as coreact sees it, read from sysfs/procfs under a root directory.

Shared by cr-cpu-layout and cr-cores. Everything is read below `root` ("/" for this
machine, a fixture tree in the tests), so the same code runs against fake trees.

The lcore choice mirrors lib/eal (eal_corelist.c, eal_topology.c) rule for rule and
message for message: an lcore id is the OS index of a CPU; by default the lowest allowed
CPU of every physical core (every allowed CPU with --smt); with -l exactly the CPUs listed,
each of which must exist (be online), be below max_lcores and be allowed.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET

INT_MAX = 2**31 - 1
CORELIST_ACCEPTED = "CPU ids and ranges like 0-3,6"
CORELIST_MAX = 255  # sizeof(cr_eal_config.corelist) - 1
QUOTE_MAX = 40      # eal_corelist.c: longest piece of user text quoted back
DEFAULT_MAX_LCORES = 128


class UsageError(Exception):
    """A bad option value; the message is one line without the program name."""


class TopologyError(Exception):
    """The tree under root cannot be read as a Linux CPU topology."""


def max_lcores_default():
    """The build's default max_lcores, from meson_options.txt when the tree has one."""
    opts = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "meson_options.txt")
    try:
        with open(opts) as f:
            text = f.read()
    except OSError:
        return DEFAULT_MAX_LCORES
    m = re.search(r"option\('max_lcores'[^)]*?value:\s*(\d+)", text, re.S)
    return int(m.group(1)) if m else DEFAULT_MAX_LCORES


# ---- cpu lists ----

def format_cpulist(cpus):
    """Sorted ids as a corelist: [0, 1, 2, 3, 6] -> "0-3,6"; empty -> ""."""
    ids = sorted(set(cpus))
    out = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        out.append(str(ids[i]) if i == j else "%d-%d" % (ids[i], ids[j]))
        i = j + 1
    return ",".join(out)


def set_txt(cpus):
    """A cpuset for an error line, as lib/eal prints it: "none" rather than ""."""
    return format_cpulist(cpus) or "none"


def parse_kernel_cpulist(text, last=None):
    """A cpulist as the kernel writes or reads it (sysfs files, boot parameters).

    Accepts "0-3,8-11", strides "0-15:2/4", "N" for the last CPU and "all" when `last`
    is known; "" and "(null)" (an empty nohz_full) are the empty set.
    Raises ValueError on anything else.
    """
    text = text.strip()
    if text in ("", "(null)"):
        return set()
    out = set()
    for part in text.split(","):
        if part == "all" and last is not None:
            out.update(range(0, last + 1))
            continue
        m = re.fullmatch(r"(\d+|N)(?:-(\d+|N)(?::(\d+)/(\d+))?)?", part)
        if m is None:
            raise ValueError("'%s' is not a CPU id or range" % part)

        def num(s):
            if s == "N":
                if last is None:
                    raise ValueError("'N' needs the number of CPUs")
                return last
            return int(s)
        lo = num(m.group(1))
        hi = num(m.group(2)) if m.group(2) is not None else lo
        if lo > hi:
            raise ValueError("range %s is reversed" % part)
        used, group = (int(m.group(3)), int(m.group(4))) if m.group(3) else (1, 1)
        if used == 0 or group == 0 or used > group:
            raise ValueError("'%s' has a bad stride" % part)
        for c in range(lo, hi + 1):
            if (c - lo) % group < used:
                out.add(c)
    return out


def _scan_number(s, i):
    """Digits from s[i]; saturates at INT_MAX + 1 like eal_corelist.c scan_number()."""
    v = 0
    j = i
    while j < len(s) and "0" <= s[j] <= "9":
        v = min(v * 10 + ord(s[j]) - ord("0"), INT_MAX + 1)
        j += 1
    return j, v


def corelist_walk(s, max_id=INT_MAX):
    """The (lo, hi) ranges of a DPDK-style corelist, checked as cr__corelist_walk() does.

    Raises UsageError with lib/eal's reason ("'x' is not a CPU id", "range 3-1 is
    reversed", "trailing ','", ...), without the "-l LIST: " prefix.
    """
    if s == "":
        raise UsageError("empty list")
    out = []
    pos = 0
    while True:
        end = s.find(",", pos)
        if end < 0:
            end = len(s)
        el = s[pos:end]
        if el == "":
            if pos == len(s):
                raise UsageError("trailing ','")
            raise UsageError("empty element at position %d" % (pos + 1))
        quoted = el[:QUOTE_MAX]
        p, lo = _scan_number(el, 0)
        if p == 0 or (p != len(el) and el[p] != "-"):
            raise UsageError("'%s' is not a CPU id" % quoted)
        hi = lo
        hi_txt = 0
        if p != len(el):
            hi_txt = p + 1
            p, hi = _scan_number(el, hi_txt)
            if p == hi_txt or p != len(el):
                raise UsageError("'%s' is not a CPU range" % quoted)
        if lo > hi:
            raise UsageError("range %s is reversed" % quoted)
        if hi > max_id:
            raise UsageError("CPU %s is above the largest supported id %d"
                             % (el[hi_txt:][:QUOTE_MAX], max_id))
        out.append((lo, hi))
        if end == len(s):
            return out
        pos = end + 1


def check_corelist_syntax(opt, value):
    """The -l check done while parsing options (eal_options.c set_corelist())."""
    if len(value) > CORELIST_MAX:
        raise UsageError("%s %s: longer than %d characters; accepted: %s"
                         % (opt, value, CORELIST_MAX, CORELIST_ACCEPTED))
    try:
        return corelist_walk(value)
    except UsageError as e:
        raise UsageError("%s %s: %s; accepted: %s"
                         % (opt, value or "''", e, CORELIST_ACCEPTED)) from None


def parse_main_lcore(value):
    """--main-lcore N as eal_options.c set_main_lcore() takes it."""
    if not re.fullmatch(r"[0-9]+", value) or int(value) > INT_MAX:
        raise UsageError("--main-lcore %s: not a CPU id; accepted: a CPU id from the lcore list"
                         % (value or "''"))
    return int(value)


def parse_cpu_option(opt, value):
    """A corelist option other than -l (--allowed, --housekeeping-cpus): a set of ids."""
    out = set()
    for lo, hi in check_corelist_syntax(opt, value):
        out.update(range(lo, hi + 1))
    return out


# ---- reading files ----

def _read(path, default=None):
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return default


def _read_int(path, default=None):
    text = _read(path)
    try:
        return int(text.strip()) if text is not None else default
    except ValueError:
        return default


def _read_list(path, last=None, default=None):
    text = _read(path)
    if text is None:
        return default
    try:
        return parse_kernel_cpulist(text, last)
    except ValueError:
        return default


def parse_size(text):
    """A sysfs cache size ("32K", "1024K", "32M") in bytes; None if unreadable."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)\s*", text or "")
    if m is None:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2)]


def format_size(n):
    """Bytes as sysfs writes cache sizes, but in the largest exact unit: 32K, 1M, 32M."""
    if n is None:
        return "?"
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)


# ---- topology ----

class Cpu:
    """One online PU (hardware thread)."""

    def __init__(self, cpu_id):
        self.id = cpu_id
        self.package = 0
        self.die = 0
        self.core_id = cpu_id
        self.siblings = frozenset([cpu_id])
        self.node = -1
        self.core = None      # the Core it belongs to
        self.caches = []      # Cache objects, L1d first


class Core:
    """A physical core: the PUs sharing it (SMT siblings)."""

    def __init__(self, cpus):
        self.cpus = sorted(cpus)
        self.index = -1       # logical index, as hwloc (and lib/eal) numbers cores
        self.core_id = None
        self.package = None
        self.node = None


class Cache:
    def __init__(self, level, ctype, size, cpus):
        self.level = level
        self.type = ctype     # "Data", "Instruction", "Unified"
        self.size = size
        self.cpus = frozenset(cpus)
        self.index = 0        # instance number among caches of the same name

    @property
    def name(self):
        suffix = {"Data": "d", "Instruction": "i"}.get(self.type, "")
        return "L%d%s" % (self.level, suffix)


class Topology:
    """CPUs, cores, packages, NUMA nodes and caches of the machine under `root`."""

    def __init__(self, root="/"):
        self.root = root
        self.cpu_dir = self.path("sys/devices/system/cpu")
        if not os.path.isdir(self.cpu_dir):
            raise TopologyError("no %s" % self.cpu_dir)
        dirs = sorted(int(m.group(1)) for m in
                      (re.fullmatch(r"cpu(\d+)", n) for n in os.listdir(self.cpu_dir)) if m)
        self.possible = _read_list(os.path.join(self.cpu_dir, "possible"), default=None)
        last = max(self.possible) if self.possible else (max(dirs) if dirs else None)
        self.last = last
        self.present = _read_list(os.path.join(self.cpu_dir, "present"), last, set(dirs))
        online = _read_list(os.path.join(self.cpu_dir, "online"), last)
        if online is None:
            online = {c for c in dirs
                      if _read(self.cpu_path(c, "online"), "1").strip() == "1"}
        self.online = online
        if not self.online:
            raise TopologyError("no online CPU in %s" % self.cpu_dir)
        self.offline = sorted((self.present | set(dirs)) - self.online)
        self.cpus = {c: self._read_cpu(c) for c in sorted(self.online)}
        self._read_nodes()
        self._build_cores()
        self._read_caches()
        self._order_cores()
        self.model = self._read_model()

    def path(self, rel):
        return os.path.join(self.root, rel)

    def cpu_path(self, cpu, rel):
        return os.path.join(self.cpu_dir, "cpu%d" % cpu, rel)

    def _read_cpu(self, c):
        cpu = Cpu(c)
        cpu.package = _read_int(self.cpu_path(c, "topology/physical_package_id"), 0)
        cpu.die = _read_int(self.cpu_path(c, "topology/die_id"), 0)
        cpu.core_id = _read_int(self.cpu_path(c, "topology/core_id"), c)
        sib = _read_list(self.cpu_path(c, "topology/core_cpus_list"), self.last)
        if sib is None:
            sib = _read_list(self.cpu_path(c, "topology/thread_siblings_list"), self.last)
        cpu.siblings = frozenset(((sib or set()) & self.online) | {c})
        return cpu

    def _read_nodes(self):
        self.nodes = {}
        node_dir = self.path("sys/devices/system/node")
        for d in glob.glob(os.path.join(node_dir, "node[0-9]*")):
            m = re.fullmatch(r"node(\d+)", os.path.basename(d))
            cpus = _read_list(os.path.join(d, "cpulist"), self.last)
            if m is None or cpus is None:
                continue
            node = int(m.group(1))
            self.nodes[node] = {
                "cpus": cpus & self.online,
                "mem_kib": self._node_mem(d),
                "distances": [int(x) for x in (_read(os.path.join(d, "distance"), "")
                                               .split()) if x.isdigit()],
            }
        if not self.nodes:
            # No NUMA in sysfs (CONFIG_NUMA off): hwloc makes one node 0 for the machine.
            self.nodes[0] = {"cpus": set(self.online), "mem_kib": None, "distances": []}
        for node, info in self.nodes.items():
            for c in info["cpus"]:
                self.cpus[c].node = node

    @staticmethod
    def _node_mem(d):
        m = re.search(r"MemTotal:\s*(\d+)\s*kB", _read(os.path.join(d, "meminfo"), ""))
        return int(m.group(1)) if m else None

    def _build_cores(self):
        by_set = {}
        for cpu in self.cpus.values():
            by_set.setdefault(cpu.siblings, []).append(cpu.id)
        self.cores = []
        for cpus in by_set.values():
            core = Core(cpus)
            first = self.cpus[core.cpus[0]]
            core.core_id = first.core_id
            core.package = first.package
            core.node = first.node
            for c in cpus:
                self.cpus[c].core = core
            self.cores.append(core)
        self.packages = {}
        for cpu in self.cpus.values():
            self.packages.setdefault(cpu.package, set()).add(cpu.id)

    def _read_caches(self):
        seen = {}
        for cpu in self.cpus.values():
            for d in sorted(glob.glob(self.cpu_path(cpu.id, "cache/index[0-9]*"))):
                level = _read_int(os.path.join(d, "level"))
                ctype = (_read(os.path.join(d, "type"), "") or "").strip()
                shared = _read_list(os.path.join(d, "shared_cpu_list"), self.last)
                if level is None or not ctype:
                    continue
                shared = ((shared or set()) & self.online) | {cpu.id}
                key = (level, ctype, frozenset(shared))
                if key not in seen:
                    seen[key] = Cache(level, ctype,
                                      parse_size(_read(os.path.join(d, "size"), "")), shared)
                cpu.caches.append(seen[key])
        order = {"Data": 0, "Instruction": 1, "Unified": 2}
        self.caches = sorted(seen.values(),
                             key=lambda k: (k.level, order.get(k.type, 3), min(k.cpus)))
        count = {}
        for k in self.caches:
            k.index = count.get(k.name, 0)
            count[k.name] = k.index + 1
        for cpu in self.cpus.values():
            cpu.caches.sort(key=lambda k: (k.level, order.get(k.type, 3)))

    def cache_of(self, cpu, name):
        for k in self.cpus[cpu].caches:
            if k.name == name:
                return k
        return None

    def _order_cores(self):
        """Number cores as hwloc does: a depth-first walk where siblings at each level
        (package, die, NUMA node, L3, L2, core) come in the order of their first CPU."""
        def first(cpus):
            return min(cpus) if cpus else -1

        def key(core):
            c = self.cpus[core.cpus[0]]
            pkg = self.packages[c.package]
            die = {x for x in pkg if self.cpus[x].die == c.die}
            node = self.nodes.get(c.node, {}).get("cpus", set()) & pkg
            l3 = self.cache_of(c.id, "L3")
            l2 = self.cache_of(c.id, "L2")
            return (first(pkg), first(die), first(node), first(l3.cpus) if l3 else -1,
                    first(l2.cpus) if l2 else -1, core.cpus[0])
        self.cores.sort(key=key)
        for i, core in enumerate(self.cores):
            core.index = i

    def _read_model(self):
        info = _read(self.path("proc/cpuinfo"), "") or ""
        m = re.search(r"^flags\s*:(.*)$", info, re.M)
        self.is_vm = m is not None and "hypervisor" in m.group(1).split()
        m = re.search(r"^model name\s*:\s*(.+)$", info, re.M)
        return m.group(1).strip() if m else None

    # ---- summaries ----

    @property
    def threads_per_core(self):
        return max(len(core.cpus) for core in self.cores)

    def summary(self):
        def n(count, word):
            return "%d %s%s" % (count, word, "" if count == 1 else "s")
        return "%s, %s, %s, %s, %s per core" % (
            n(len(self.packages), "package"), n(len(self.nodes), "NUMA node"),
            n(len(self.cores), "core"), n(len(self.online), "CPU"),
            n(self.threads_per_core, "thread"))

    def core_cpus(self, cpus):
        """Every CPU of the cores that `cpus` touch."""
        out = set()
        for c in cpus:
            out.update(self.cpus[c].core.cpus)
        return out


# ---- kernel isolation (boot parameters and what the running kernel reports) ----

ISOLCPUS_FLAGS = ("nohz", "domain", "managed_irq")


def parse_isolcpus(value, last=None):
    """isolcpus=[flag,...,]list -> (flags, cpus). No flag means "domain", as the kernel
    reads it (housekeeping_isolcpus_setup)."""
    flags = []
    rest = value
    while rest[:1].isalpha() and "," in rest:
        word, rest = rest.split(",", 1)
        flags.append(word)
    try:
        cpus = parse_kernel_cpulist(rest, last)
    except ValueError:
        cpus = set()
    if not any(f in ISOLCPUS_FLAGS for f in flags):
        flags.append("domain")
    return flags, cpus


class Isolation:
    """isolcpus=, nohz_full=, rcu_nocbs=, irqaffinity= of the running kernel."""

    PARAMS = ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")

    def __init__(self, topo):
        self.cmdline = (_read(topo.path("proc/cmdline"), "") or "").strip()
        self.params = {}
        for word in self.cmdline.split():
            if word == "--":
                break       # the rest is for init
            name, eq, value = word.partition("=")
            if eq and name in self.PARAMS:
                self.params[name] = value.strip('"')
        last = topo.last
        self.isolcpus_flags, isol = parse_isolcpus(self.params.get("isolcpus", ""), last)
        domain = isol if "domain" in self.isolcpus_flags else set()
        self.isolcpus = isol
        sys_isol = _read_list(os.path.join(topo.cpu_dir, "isolated"), last)
        # The running kernel's own view wins over the command line when it has one.
        self.isolated = sys_isol if sys_isol is not None else domain
        self.nohz_full_supported = os.path.exists(os.path.join(topo.cpu_dir, "nohz_full"))
        sys_nohz = _read_list(os.path.join(topo.cpu_dir, "nohz_full"), last)
        self.nohz_full = (sys_nohz if sys_nohz is not None else
                          self._cmd_list("nohz_full", last))
        self.rcu_nocbs = self._cmd_list("rcu_nocbs", last)
        self.irqaffinity = self._cmd_list("irqaffinity", last)

    def _cmd_list(self, name, last):
        try:
            return parse_kernel_cpulist(self.params.get(name, ""), last)
        except ValueError:
            return set()

    @property
    def any_isolated(self):
        return self.isolated | self.nohz_full


# ---- which CPUs this process may use ----

def process_allowed(topo, given=None):
    """What lib/eal's find_allowed() sees: the test's set, or this process's affinity (which
    the kernel keeps inside the cgroup cpuset) when reading this machine; else every
    online CPU of a fixture tree."""
    if given is not None:
        return set(given) & topo.online
    if os.path.realpath(topo.root) == "/" and hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0)) & topo.online
    return set(topo.online)


# ---- the lcore choice, as lib/eal makes it ----

class Selection:
    def __init__(self, lcores, main, how, warnings):
        self.lcores = lcores
        self.main = main
        self.how = how
        self.warnings = warnings


def choose_lcores(topo, allowed, corelist=None, smt=False, main_lcore=None,
                  max_lcores=DEFAULT_MAX_LCORES):
    """cr_eal_lcore_table() in Python. Raises UsageError with its one-line message."""
    present = topo.online
    chosen = []
    warnings = []
    if corelist is not None:
        check_corelist_syntax("-l", corelist)

        def check_present(cpu):
            if cpu not in present:
                raise UsageError("-l %s: CPU %d does not exist; this machine has CPUs %s"
                                 % (corelist, cpu, set_txt(present)))

        for lo, hi in corelist_walk(corelist):
            # The far end first: "-l 0-999" is about CPU 999, whatever lies between.
            check_present(hi)
            for cpu in range(lo, hi + 1):
                check_present(cpu)
                if cpu >= max_lcores:
                    raise UsageError(
                        "-l %s: CPU %d is above the largest lcore id %d; accepted: CPUs 0-%d "
                        "(build option max_lcores)" % (corelist, cpu, max_lcores - 1,
                                                       max_lcores - 1))
                if cpu not in allowed:
                    raise UsageError("-l %s: CPU %d is not in the allowed cpuset %s"
                                     % (corelist, cpu, set_txt(allowed)))
                if cpu not in chosen:
                    chosen.append(cpu)
        how = "-l %s" % corelist
    else:
        taken = set()
        too_large = 0
        for cpu in sorted(allowed):
            if cpu not in topo.cpus:
                continue
            if cpu >= max_lcores:
                too_large += 1
                continue
            core = topo.cpus[cpu].core
            if not smt:
                if core.index in taken:
                    continue
                taken.add(core.index)
            chosen.append(cpu)
        if not chosen:
            if too_large:
                raise UsageError("lcore selection: every allowed CPU is above the largest "
                                 "lcore id %d; accepted: CPUs 0-%d (build option max_lcores)"
                                 % (max_lcores - 1, max_lcores - 1))
            raise UsageError("lcore selection: no CPU of this machine (%s) is in the allowed "
                             "cpuset %s" % (set_txt(present), set_txt(allowed)))
        if too_large:
            warnings.append("%d allowed CPUs are above the largest lcore id %d and left unused "
                            "(build option max_lcores)" % (too_large, max_lcores - 1))
        how = "--smt: every allowed CPU" if smt else "default: the first allowed CPU of each core"
    chosen.sort()
    if main_lcore is not None and main_lcore not in chosen:
        lst = format_cpulist(chosen)
        raise UsageError("--main-lcore %d: not in the lcore list %s; accepted: one of %s"
                         % (main_lcore, lst, lst))
    main = main_lcore if main_lcore is not None else chosen[0]
    return Selection(chosen, main, how, warnings)


# ---- hwloc, as a cross-check ----

def hwloc_summary(root="/", timeout=10):
    """Counts from `lstopo-no-graphics --of xml`, or None when hwloc's CLI is absent or
    fails. A root other than "/" is read with hwloc's fsroot input."""
    exe = shutil.which("lstopo-no-graphics")
    if exe is None:
        return None
    cmd = [exe, "--no-io", "--disallowed", "--of", "xml", "-"]
    if os.path.realpath(root) != "/":
        cmd[1:1] = ["--input", root, "--if", "fsroot"]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           timeout=timeout, check=False)
        if r.returncode != 0:
            return None
        tree = ET.fromstring(r.stdout)
    except (OSError, subprocess.SubprocessError, ET.ParseError):
        return None
    out = {"version": None, "packages": 0, "numa_nodes": 0, "cores": 0, "pus": [],
           "core_pus": []}
    for obj in tree.iter("object"):
        t = obj.get("type")
        if t == "Machine":
            for info in obj.findall("info"):
                if info.get("name") == "hwlocVersion":
                    out["version"] = info.get("value")
        elif t == "Package":
            out["packages"] += 1
        elif t == "NUMANode":
            out["numa_nodes"] += 1
        elif t == "Core":
            out["cores"] += 1
            out["core_pus"].append(sorted(int(p.get("os_index")) for p in obj.iter("object")
                                          if p.get("type") == "PU"))
        elif t == "PU":
            out["pus"].append(int(obj.get("os_index")))
    out["pus"].sort()
    return out


def hwloc_disagreements(topo, hw):
    """What hwloc counts differently from sysfs, as short phrases; [] when they agree."""
    out = []
    if hw["pus"] != sorted(topo.online):
        out.append("PUs %s (sysfs: %s)" % (set_txt(hw["pus"]), set_txt(topo.online)))
    for name, ours in (("packages", len(topo.packages)), ("numa_nodes", len(topo.nodes))):
        if hw[name] != ours:
            out.append("%d %s (sysfs: %d)" % (hw[name], name.replace("_", " "), ours))
    if hw["cores"]:
        if hw["core_pus"] != [c.cpus for c in topo.cores]:
            out.append("cores %s (sysfs: %s)" % (
                " ".join(format_cpulist(c) for c in hw["core_pus"]),
                " ".join(format_cpulist(c.cpus) for c in topo.cores)))
    return out


# ---- output ----

def dumps(doc, indent=0):
    """JSON with two-space indents, but lists of plain values kept on one line."""
    pad = " " * (indent + 2)
    if isinstance(doc, dict) and doc:
        items = ("%s%s: %s" % (pad, json.dumps(k), dumps(v, indent + 2)) for k, v in doc.items())
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    if isinstance(doc, list) and any(isinstance(v, (dict, list)) for v in doc):
        items = (pad + dumps(v, indent + 2) for v in doc)
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    return json.dumps(doc)
