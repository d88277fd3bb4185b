"""Per-run resource limits, with the defaults every exercise gets unless it says otherwise."""

from dataclasses import asdict, dataclass, fields, replace

KIB = 1024
MIB = 1024 * KIB
BACKSTOP_FACTOR = 10  # real time a job may take: this many times its CPU budget


@dataclass(frozen=True)
class Limits:
    # The grading's work: CPU seconds its processes may use together (what the program
    # did, not how busy the machine is). Real time only catches a run that is blocked
    # (`stall_s` without any CPU used) or a machine overloaded BACKSTOP_FACTOR times over.
    wall_s: float = 20.0
    stall_s: float = 5.0  # real seconds in which no process of the job used any CPU
    memory_mib: int = 1024  # memory + swap of everything in the sandbox
    # CPU quota, in cores: two let a grading make its runs on two CPUs (runner.sim.parallel)
    cpus: float = 2.0
    processes: int = 64  # processes and threads together
    output_kib: int = 64  # what the run may write to stderr (and what is kept of it)
    disk_mib: int = 16  # the writable /tmp; also the largest file the run may write
    open_files: int = 256
    result_kib: int = 4096  # the grader's JSON result on stdout

    def __post_init__(self):
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError(f"limit {field.name} must be a positive number, not {value!r}")

    @classmethod
    def from_mapping(cls, values: dict | None) -> "Limits":
        """Defaults overridden by an exercise's `limits:` mapping; unknown keys are errors."""
        values = dict(values or {})
        known = {field.name for field in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown limit(s): {', '.join(unknown)}")
        return replace(cls(), **values)

    def as_dict(self) -> dict:
        return asdict(self)

    @property
    def backstop_s(self) -> float:
        """Real seconds after which a job is stopped whatever it did (an overloaded host)."""
        return max(self.wall_s * BACKSTOP_FACTOR, 120.0)

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_mib * MIB)

    @property
    def output_bytes(self) -> int:
        return int(self.output_kib * KIB)

    @property
    def disk_bytes(self) -> int:
        return int(self.disk_mib * MIB)

    @property
    def result_bytes(self) -> int:
        return int(self.result_kib * KIB)

    def creation_key(self) -> tuple:
        """The limits fixed when a sandbox is created: pooled sandboxes must match them."""
        return (self.memory_mib, self.cpus, self.processes, self.disk_mib, self.open_files)
