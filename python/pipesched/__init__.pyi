# Type stubs for the pipesched extension module (pipesched._pipesched, re-exported here).
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, overload

__version__: str
HAS_NUMPY: bool

class InvalidArgument(ValueError): ...

class OpKind:
    """Op kinds by short name: F, B, W, BW, R, SEND_F, RECV_F, SEND_B, RECV_B (and any kind the
    library adds, under its short name)."""
    F: OpKind
    B: OpKind
    W: OpKind
    BW: OpKind
    R: OpKind
    SEND_F: OpKind
    RECV_F: OpKind
    SEND_B: OpKind
    RECV_B: OpKind
    name: str
    value: int
    __members__: dict[str, OpKind]
    @property
    def is_compute(self) -> bool: ...
    @property
    def is_comm(self) -> bool: ...
    def __init__(self, value: int) -> None: ...
    def __int__(self) -> int: ...

class Op:
    def __init__(self, kind: Union[OpKind, str], mb: int, chunk: int = 0,
                 overlap_next: bool = False, recompute: bool = False) -> None: ...
    @property
    def kind(self) -> OpKind: ...
    @property
    def mb(self) -> int: ...
    @property
    def chunk(self) -> int: ...
    @property
    def overlap_next(self) -> bool: ...
    @property
    def recompute(self) -> bool: ...
    def same_work(self, other: Op) -> bool: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

class Placement:
    @staticmethod
    def sequential(stages: int) -> Placement: ...
    @staticmethod
    def loop(stages: int, chunks: int) -> Placement: ...
    @staticmethod
    def v_shape(stages: int) -> Placement: ...
    @staticmethod
    def custom(stages: int, chunks: int, table: Sequence[int]) -> Placement: ...
    @property
    def stages(self) -> int: ...
    @property
    def chunks(self) -> int: ...
    @property
    def total_chunks(self) -> int: ...
    @property
    def kind(self) -> str: ...
    def global_chunk(self, stage: int, chunk: int) -> int: ...
    def stage_of(self, global_chunk: int) -> int: ...
    def local_of(self, global_chunk: int) -> int: ...

class Schedule:
    @overload
    def __init__(self, stages: int, microbatches: int, name: str = "",
                 ops: Optional[Sequence[Sequence[Op]]] = None) -> None: ...
    @overload
    def __init__(self, placement: Placement, microbatches: int, name: str = "",
                 ops: Optional[Sequence[Sequence[Op]]] = None) -> None: ...
    name: str
    ops: list[list[Op]]
    @property
    def stages(self) -> int: ...
    @property
    def microbatches(self) -> int: ...
    @property
    def chunks(self) -> int: ...
    @property
    def placement(self) -> Placement: ...
    def stage_ops(self, stage: int) -> list[Op]: ...
    def set_stage_ops(self, stage: int, ops: Sequence[Op]) -> None: ...
    def has_comm(self) -> bool: ...
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class OpCosts:
    forward: float
    backward_input: float
    backward_weight: float
    overlapped: Optional[float]
    def __init__(self, forward: float = 1.0, backward_input: float = 1.0,
                 backward_weight: float = 1.0, overlapped: Optional[float] = None) -> None: ...

class CostModel:
    def __init__(self) -> None: ...
    @staticmethod
    def uniform(forward: float, backward_input: float, backward_weight: float,
                comm: float = 0.0) -> CostModel: ...
    @staticmethod
    def from_json(text: str) -> CostModel: ...
    def set_overlapped(self, t_fb: float) -> CostModel: ...
    def set_stage_costs(self, per_stage: Sequence[OpCosts]) -> CostModel: ...
    def set_chunk_costs(self, chunks: int, per_chunk: Sequence[OpCosts]) -> CostModel: ...
    def set_comm(self, comm: float) -> CostModel: ...
    def set_link_comm(self, stages: int, latencies: Sequence[float]) -> CostModel: ...

class ChunkMemory:
    activation: float
    weight_grad_input: float
    received: float
    def __init__(self, activation: float = 1.0, weight_grad_input: float = 0.5,
                 received: float = 0.0) -> None: ...

class MemoryModel:
    def __init__(self) -> None: ...
    @staticmethod
    def uniform(activation: float, weight_grad_input: float) -> MemoryModel: ...
    @staticmethod
    def from_json(text: str) -> MemoryModel: ...
    def set_stage_memory(self, per_stage: Sequence[ChunkMemory]) -> MemoryModel: ...
    def set_chunk_memory(self, chunks: int, per_chunk: Sequence[ChunkMemory]) -> MemoryModel: ...
    def set_static_memory(self, per_stage: Sequence[float]) -> MemoryModel: ...

class TransformerProfile:
    @property
    def costs(self) -> OpCosts: ...
    @property
    def memory(self) -> ChunkMemory: ...
    def cost_model(self, comm: float = 0.0) -> CostModel: ...
    def memory_model(self) -> MemoryModel: ...

def transformer_costs(hidden: int, heads: int, sequence: int, microbatch: int, layers: int = 1,
                      *, units: str = "per_layer") -> TransformerProfile: ...

Cost = Union[CostModel, Sequence[float], None]
Memory = Union[MemoryModel, Sequence[float], None]
Limit = Union[float, Sequence[float], None]
# Per-stage numbers: numpy arrays when numpy is installed (HAS_NUMPY), else lists.
Numbers = Any

class GeneratorInfo:
    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def default_chunks(self) -> int: ...
    @property
    def searches(self) -> bool: ...

def schedules() -> list[GeneratorInfo]: ...

class BudgetViolation:
    stage: int
    limit: float
    op_index: int
    value: float
    peak: float
    peak_op_index: int
    message: str

class GenerationResult:
    @property
    def schedule(self) -> Schedule: ...
    @property
    def lower_bound(self) -> Optional[float]: ...
    @property
    def span(self) -> Optional[float]: ...
    @property
    def published_span(self) -> Optional[float]: ...
    @property
    def search_evaluations(self) -> Optional[int]: ...
    @property
    def memory_violations(self) -> list[BudgetViolation]: ...

def generate(schedule: Union[str, Schedule], stages: Optional[int] = None,
             microbatches: Optional[int] = None, *, chunks: Optional[int] = None,
             cost: Cost = None, costs: Optional[str] = None, memory: Memory = None,
             memory_file: Optional[str] = None, memory_limit: Limit = None,
             search_budget: Optional[float] = None, search_evaluations: Optional[int] = None,
             recompute: Union[str, Sequence[int], None] = None,
             recompute_policy: str = "before-backward",
             with_comm: bool = False, recv: str = "eager") -> Schedule: ...
def generate_result(schedule: Union[str, Schedule], stages: Optional[int] = None,
                    microbatches: Optional[int] = None, *,
                    chunks: Optional[int] = None, cost: Cost = None,
                    costs: Optional[str] = None, memory: Memory = None,
                    memory_file: Optional[str] = None, memory_limit: Limit = None,
                    search_budget: Optional[float] = None,
                    search_evaluations: Optional[int] = None,
                    recompute: Union[str, Sequence[int], None] = None,
                    recompute_policy: str = "before-backward", with_comm: bool = False,
                    recv: str = "eager") -> GenerationResult: ...
def lower_communication(schedule: Schedule, *, recv: str = "eager", cost: Cost = None,
                        costs: Optional[str] = None) -> Schedule: ...

class BlockedStage:
    stage: int
    op_index: int
    op: Op
    waits_on_stage: int
    waits_for: str
    never_produced: bool

class DeadlockWitness:
    stuck: list[BlockedStage]
    cycle: list[int]
    def describe(self) -> str: ...

class Violation:
    kind: str
    stage: int
    op_index: Optional[int]
    message: str

class ValidationReport:
    ok: bool
    violations: list[Violation]
    total: int
    truncated: int
    deadlock: Optional[DeadlockWitness]
    def count(self, kind: str) -> int: ...
    def __bool__(self) -> bool: ...

def validate(schedule: Schedule, *, max_violations: int = 1000,
             check_feasibility: bool = True) -> ValidationReport: ...

class TimedOp:
    stage: int
    index: int
    op: Op
    start: float
    end: float
    duration: float

class StageTiming:
    first_start: float
    last_end: float
    span: float
    busy: float
    comm: float
    idle: float
    idle_fraction: float
    makespan_idle: float
    ops_run: int

class SimulationResult:
    makespan: float
    bubble_rate: float
    utilization: float
    max_span_stage: int
    stages: list[StageTiming]
    ops: list[list[TimedOp]]
    starts: list[Numbers]
    ends: list[Numbers]
    critical_path: list[Tuple[int, int]]
    deadlock: Optional[DeadlockWitness]
    completed: bool

def simulate(schedule: Schedule, *, cost: Cost = None, costs: Optional[str] = None,
             record_ops: bool = True, critical_path: bool = True,
             validate: bool = True) -> SimulationResult: ...

class LifetimeError:
    kind: str
    stage: int
    op_index: int
    buffer: str
    message: str

class StageMemory:
    static_memory: float
    peak: float
    peak_op_index: Optional[int]
    peak_time: float
    peak_stage_units: float
    final_value: float
    curve: Numbers
    curve_time: Numbers

class MemoryReport:
    stages: list[StageMemory]
    errors: list[LifetimeError]
    total_errors: int
    violations: list[BudgetViolation]
    ok: bool
    lifetimes_ok: bool
    within_budget: bool
    max_peak: float
    def peak_memory(self, stage: int) -> float: ...

def check_memory(schedule: Schedule, *, memory: Memory = None, memory_file: Optional[str] = None,
                 memory_limit: Union[float, Sequence[float], None] = None,
                 record_curve: bool = True,
                 simulation: Optional[SimulationResult] = None) -> MemoryReport: ...
def simulation_json(schedule: Schedule, *, cost: Cost = None, costs: Optional[str] = None,
                    memory: Memory = None, memory_file: Optional[str] = None,
                    memory_limit: Limit = None,
                    lower_bound: Optional[float] = None) -> str: ...

def to_json(schedule: Schedule) -> str: ...
def from_json(text: str) -> Schedule: ...
def to_torch_csv(schedule: Schedule, *, csv_layout: Optional[str] = None,
                 csv_spelling: Optional[str] = None) -> str: ...
def from_torch_csv(text: str, name: str = "torch-csv") -> Schedule: ...
def to_torch_actions(schedule: Schedule, *, csv_layout: Optional[str] = None,
                     csv_spelling: Optional[str] = None) -> list[list[Optional[str]]]: ...
def export_schedule(prefix: str, schedule: Schedule, *, cost: Cost = None,
                    costs: Optional[str] = None, memory: Memory = None,
                    memory_file: Optional[str] = None) -> List[str]: ...
def read_schedule(path: str, *, input_format: Optional[str] = None) -> Schedule: ...
def model_presets() -> List[str]: ...
def gpu_presets() -> List[str]: ...
def plan(model: str, gpu: str, *, gpus: Optional[int] = None, seq: Optional[int] = None,
         tp: Optional[int] = None, cp: Optional[int] = None, pp: Optional[int] = None,
         dp: Optional[int] = None, chunks: Optional[int] = None, schedule: Optional[str] = None,
         micro_batch: Optional[int] = None, microbatches: Optional[int] = None,
         global_batch: Optional[int] = None, global_batch_tokens: Optional[int] = None,
         sequence_parallel: Optional[bool] = None, recompute: Optional[str] = None,
         optimizer_sharding: str = "optimizer", partition: str = "balanced", top: int = 5,
         baseline: Union[None, str, Dict[str, Any], List[Union[str, Dict[str, Any]]]] = None,
         vocab_multiple: Optional[int] = None, achieved_fraction: Optional[float] = None,
         usable_fraction: Optional[float] = None, search_evaluations: Optional[int] = None,
         threads: Optional[int] = None, format: str = "json", ep: Optional[int] = None,
         moe_imbalance: Optional[float] = None, memory_efficient_norm: bool = False) -> Any: ...

def pack(model: str, lengths: Union[str, Sequence[int]], *, gpu: str = "h100-sxm-80gb",
         tokens_per_microbatch: Optional[int] = None, microbatches: Optional[int] = None,
         stages: Optional[int] = None, schedule: str = "1f1b", chunks: Optional[int] = None,
         tp: Optional[int] = None, sequence_parallel: bool = False,
         recompute: str = "selective", memory_limit: Union[None, float, str] = None,
         search_evaluations: Optional[int] = None, search_budget: Optional[float] = None,
         format: str = "json") -> Any: ...

def whatif(schedule: Schedule, *, cost: Cost = None, costs: Optional[str] = None,
           memory: Memory = None, memory_file: Optional[str] = None,
           memory_limit: Limit = None, cv: float = 0.0, link_cv: float = 0.0,
           stragglers: Sequence[Tuple[int, float]] = (),
           stalls: Optional[Tuple[float, float]] = None, samples: int = 100, seed: Optional[int] = None,
           sensitivity: bool = False, dynamic: bool = False, replicas: Optional[int] = None,
           gradient_bytes: Optional[float] = None, bandwidth: Optional[float] = None,
           allreduce_latency: Optional[float] = None,
           link_bandwidth: Optional[Sequence[float]] = None,
           message_bytes: Optional[Sequence[float]] = None, traffic: Optional[str] = None,
           buckets: Optional[int] = None, format: str = "json") -> str: ...
def analyze(path: str, *, abs_threshold: float = 0.0, rel_threshold: float = 0.03,
            comm: float = 0.0, replan: Sequence[str] = ("zb-auto", "zb-v"),
            memory_limit: Limit = None, allow_overlaps: bool = False,
            planned_costs: Optional[str] = None, planned_fraction: Optional[float] = None,
            seconds_per_unit: Optional[float] = None, format: str = "json") -> str: ...
