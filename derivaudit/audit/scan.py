"""`scan`: views -> obligations -> D/E/R primitives (both views) -> labels -> scope report.

Everything goes through the files of a run folder (`derivaudit.runs` owns their names and
formats), one per stage, each written atomically. A stage whose file exists with the same
fingerprint (input, settings, models, prompts) is not redone; the two long stages append to a
partial file as they go, so an interrupted run resumes where it stopped, and the model result
cache makes any recomputation nearly free. The run's `ScanConfig` is saved in `meta.json`, so
`decompose RUN` and `annotate RUN` continue with the same settings.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__, templates
from ..log.records import MemoryLog, Write
from ..models import ModelPool, ModelRoles, ModelSpec
from ..models.base import usage_report
from ..rates import sampling
from ..runs import folder as runs
from ..runs.folder import VIEW_NAMES, Stage, load_meta, save_meta
from . import calibrate, conflicts, incremental
from .annotate import SUBSET_RULES, Annotator, Item
from .annotate import annotate as run_annotators
from .conflicts import write_time
from .decompose import PARSE_RULES, Decomposition, decompose
from .evidence import EvidenceSettings, EvidenceViews, build_views
from .labels import RULES, carry_across_views
from .scope import _primitive_row, label_writes, scope_report

Progress = Callable[[str, int, int], None]  # (stage, advance, total)
UNTIL = tuple(runs.STAGES)  # the stages, in order: views, obligations, primitives, labels
_fp = runs.fingerprint


def prompts_fingerprint(*prefixes: str) -> str:
    """Hash of the prompt files a stage uses (names starting with one of `prefixes`)."""
    d = templates.prompt_dir()
    return _fp(sorted((p.name, p.read_text("utf-8")) for p in d.glob("*.txt") if p.name.startswith(prefixes)))


@dataclass
class ScanConfig:
    """Everything a scan needs besides the log: saved in meta.json so stage commands can resume."""

    evidence: EvidenceSettings = field(default_factory=EvidenceSettings)
    limit: int | None = None
    conversations: list[str] | None = None
    sample: int | None = None  # audit a random sample of this many writes, stratified by conversation
    sample_seed: int = 0
    chunk: int | None = None  # writes per model round trip; None: 1 in-process (a kill loses one write), 8 on servers
    until: str = "labels"  # views | obligations | primitives | labels
    models: ModelRoles = field(default_factory=ModelRoles)  # annotator_a, annotator_b, adjudicator
    files: list[str] = field(default_factory=list)  # input logs, as given
    history: list[str] = field(default_factory=list)  # extra files holding turns
    use_cache: bool = True
    skip_invalid: bool = False
    calibrate: bool = True  # per-annotator E/R thresholds at FPR <= 0.10 (else argmax)
    calibrate_on: str = "log"  # calibration items from: log | packaged | PATH (calibrate.corpus)
    allow_empty: bool = False  # a selection of zero writes is an error unless asked for
    rubric: str | None = None  # after labels: annotator A again in this wording (not saved: one-off)

    def __post_init__(self) -> None:
        if self.until not in UNTIL:
            raise ValueError(f"--until must be one of {', '.join(UNTIL)}, not {self.until!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"evidence": self.evidence.to_dict(), "limit": self.limit, "conversations": self.conversations,
                "sample": self.sample, "sample_seed": self.sample_seed,
                "chunk": self.chunk, "models": self.models.to_dict(), "files": list(self.files),
                "history": list(self.history), "use_cache": self.use_cache, "skip_invalid": self.skip_invalid,
                "calibrate": self.calibrate, "calibrate_on": self.calibrate_on, "allow_empty": self.allow_empty}

    @classmethod
    def from_dict(cls, d: dict[str, Any], until: str = "labels") -> ScanConfig:
        return cls(evidence=EvidenceSettings.from_dict(d.get("evidence", {})), limit=d.get("limit"),
                   conversations=d.get("conversations"), sample=d.get("sample"),
                   sample_seed=d.get("sample_seed", 0), chunk=d.get("chunk"), until=until,
                   models=ModelRoles.from_dict(d.get("models", {})), files=list(d.get("files", [])),
                   history=list(d.get("history", [])), use_cache=d.get("use_cache", True),
                   skip_invalid=d.get("skip_invalid", False), calibrate=d.get("calibrate", True),
                   calibrate_on=d.get("calibrate_on", "log"), allow_empty=d.get("allow_empty", False))

    @classmethod
    def from_meta(cls, meta: dict[str, Any], until: str = "labels") -> ScanConfig | None:
        """The config a run was started with (also from the option dict of runs made before 0.2)."""
        if "config" in meta:
            return cls.from_dict(meta["config"], until)
        old = meta.get("cli")
        if not old:
            return None
        base = tuple(old.get("base_url") or ())
        default = ModelSpec(old.get("backend") or "transformers", old.get("model") or "smollm2", base,
                            old.get("top_logprobs"))

        def spec(be: str | None, m: str | None) -> ModelSpec:
            b = be or default.backend
            return ModelSpec(b, m or default.model, base if b == "openai" else (),
                             default.top_logprobs if b == "openai" else None)

        roles = {}
        if old.get("backend_b") or old.get("model_b"):
            roles["annotator_b"] = spec(old.get("backend_b"), old.get("model_b"))
        if old.get("adjudicator_backend") or old.get("adjudicator_model"):
            roles["adjudicator"] = spec(old.get("adjudicator_backend"), old.get("adjudicator_model"))
        return cls(evidence=EvidenceSettings(limit_floor=old.get("limit_floor", 0.5)), limit=old.get("limit"),
                   conversations=old.get("conversation"), until=until, models=ModelRoles(default, roles),
                   files=old.get("files", []), history=old.get("history", []),
                   use_cache=not old.get("no_cache"), skip_invalid=bool(old.get("skip_invalid")))


def open_annotators(pool: ModelPool, models: ModelRoles) -> tuple[Annotator, Annotator, Annotator]:
    """A, B and the adjudicator from their roles; roles on one model share one loaded backend."""
    return (Annotator("A", pool.get(models.spec("annotator_a")), "a"),
            Annotator("B", pool.get(models.spec("annotator_b")), "b"),
            Annotator("adjudicator", pool.get(models.spec("adjudicator")), "a"))


def select_writes(log: MemoryLog, cfg: ScanConfig) -> list[Write]:
    ws = [w for w in log.writes if not cfg.conversations or w.conversation_id in cfg.conversations]
    ws = ws[: cfg.limit] if cfg.limit is not None else ws
    if cfg.sample is not None:
        chosen = set(sampling.stratified([(w.write_id, w.conversation_id) for w in ws], cfg.sample, cfg.sample_seed))
        ws = [w for w in ws if w.write_id in chosen]
    return ws


def store_of(log: MemoryLog, cfg: ScanConfig) -> dict[str, int]:
    """The store a sample stands for: writes per conversation of the selection before sampling."""
    return dict(Counter(w.conversation_id for w in select_writes(log, ScanConfig(limit=cfg.limit,
                                                                                   conversations=cfg.conversations))))


def _noop(stage: str, advance: int, total: int) -> None:
    pass


def _quiet(message: str) -> None:
    pass


def chunk_size(cfg: ScanConfig, annotators: Sequence[Annotator]) -> int:
    """Writes per round trip: one for serial in-process models (nothing to batch; the partial file
    gets every write as soon as it is judged), eight for batching engines and servers."""
    from ..models import BACKENDS

    if cfg.chunk:
        return cfg.chunk
    return 1 if all(BACKENDS.has(x.backend.name, "serial") for x in annotators) else 8


def scan(log: MemoryLog, run: str | Path, annotators: tuple[Annotator, Annotator, Annotator] | None = None, *,
         cfg: ScanConfig | None = None, input_files: Sequence[str | Path] = (),
         progress: Progress = _noop, pool: ModelPool | None = None,
         notify: Callable[[str], None] = _quiet) -> dict[str, Any]:
    """Run (or resume) every stage into `run` and return the scope report ({} when stopped early).
    Without `annotators` the models of `cfg.models` are opened (from `pool` when given). The run
    folder is locked for the whole scan; `notify` hears what a person should know (a resumed kill,
    a damaged stage file redone)."""
    cfg = cfg or ScanConfig()
    run = Path(run)
    run.mkdir(parents=True, exist_ok=True)
    with runs.lock(run) as stale, contextlib.ExitStack() as stack:
        why = another_log(run, log)
        if why:
            raise runs.RunError(f"{run} holds the audit of another version of this log ({why}): its results are "
                                "not mixed with a different store's; scan into a new folder (-o NEW_FOLDER), or "
                                "delete this one to start over")
        if stale:
            notify(f"a previous scan (pid {stale}) stopped before it finished; resuming from its files")
        if annotators is None:
            if pool is None:
                pool = stack.enter_context(contextlib.closing(ModelPool(cache=cfg.use_cache)))
            annotators = open_annotators(pool, cfg.models)
        return _scan(log, run, annotators, cfg, input_files, progress, notify)


def another_log(run: str | Path, log: MemoryLog) -> str | None:
    """Why the run folder holds the audit of a log that `log` did not grow from (None when it is
    the same log, a grown one, or a run made before logs were digested)."""
    old = load_meta(run).get("log_digest")
    return incremental.not_grown(old, log) if isinstance(old, dict) else None


def _scan(log: MemoryLog, run: Path, annotators: tuple[Annotator, Annotator, Annotator], cfg: ScanConfig,
          input_files: Sequence[str | Path], progress: Progress, notify: Callable[[str], None]) -> dict[str, Any]:
    """The stages in order, each timed and saved in meta.json, stopping after `cfg.until`."""
    p = _Pass(log, run, annotators, cfg, input_files, progress, notify)
    for stage in (p.views, p.obligations, p.calibration, p.primitives):
        t0 = time.time()
        stopped = stage()
        p.timings[stage.__name__] = round(time.time() - t0, 3)
        if stage.__name__ != "calibration":  # saved with the primitives it decides
            save_meta(run, p.meta)
        if stopped:
            return {}
    return p.labels()


class _Pass:
    """One scan of a run folder: the state its stages hand on (views, decompositions, rows), the
    run's meta.json and what an earlier scan of the run leaves to reuse."""

    def __init__(self, log: MemoryLog, run: Path, annotators: tuple[Annotator, Annotator, Annotator],
                 cfg: ScanConfig, input_files: Sequence[str | Path], progress: Progress,
                 notify: Callable[[str], None]):
        self.log, self.run, self.annotators, self.cfg = log, run, annotators, cfg
        self.progress, self.notify = progress, notify
        self.chunk = chunk_size(cfg, annotators)
        self.started = time.time()
        digest = incremental.digest(log)
        self.input_hash = _fp([hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in input_files]) \
            if input_files else _fp(digest)
        self.writes = select_writes(log, cfg)
        self.meta = meta = load_meta(run)
        meta.update({
            "derivaudit": __version__, "input_files": [str(f) for f in input_files], "input_sha": self.input_hash,
            "selection": {"limit": cfg.limit, "conversations": cfg.conversations, "writes": len(self.writes),
                          "sample": None if cfg.sample is None else
                          {"n": cfg.sample, "seed": cfg.sample_seed, "design": sampling.DESIGN,
                           "store_conversations": store_of(log, cfg)}},
            "evidence": cfg.evidence.to_dict(),
            "annotators": {x.role: x.describe() for x in annotators},
            "skipped_records": [p.to_dict() for p in log.skipped],
            "log_digest": digest,
        })
        meta["config"] = cfg.to_dict()
        meta.pop("cli", None)
        self.timings: dict[str, float] = meta.setdefault("timings", {})
        self.reuse = incremental.Reuse(run, notify)
        self.reused: dict[str, int] = {}  # stage -> rows taken from the earlier scan of this run
        self.health: dict[str, Any] = {}

    def done(self, st: Stage) -> bool:
        if st.done():
            return True
        if st.why:
            self.notify(f"redoing the {st.name} stage: {st.why}")
        return False

    def views(self) -> bool:
        cfg, writes = self.cfg, self.writes
        self.fp_views = _fp(self.input_hash, cfg.evidence.to_dict(), [w.write_id for w in writes])
        st = Stage(self.run, "views", self.fp_views, self.meta)
        self.view_list: list[EvidenceViews] = list(build_views(self.log, cfg.evidence, {w.write_id for w in writes}))
        self.keys = {v.write.write_id: incremental.write_key(v.to_dict(), v.write) for v in self.view_list}
        if not self.done(st):
            st.finish([v.to_dict() for v in self.view_list])
        self.progress("views", len(self.view_list), len(self.view_list))
        return cfg.until == "views"

    def obligations(self) -> bool:
        a, writes, reuse = self.annotators[0], self.writes, self.reuse
        settings = (a.backend.identity(), prompts_fingerprint("decompose"), PARSE_RULES)
        set_obl, self.fp_obl = _fp(*settings), _fp(self.fp_views, *settings)  # the latter as before reuse.json
        st = Stage(self.run, "obligations", self.fp_obl, self.meta)
        if self.done(st):
            self.decs = [Decomposition.from_dict(r) for r in st.load()]
            self.reused["obligations"] = len(self.decs)
            self.progress("obligations", len(self.decs), len(writes))
        else:
            have = {r["write_id"]: Decomposition.from_dict(r) for r in st.resumed()}
            old = reuse.usable("obligations", set_obl, self.keys) - set(have)
            have.update((r["write_id"], Decomposition.from_dict(r)) for r in reuse.rows("obligations", old))
            self.reused["obligations"] = len(old)
            self.progress("obligations", len(have), len(writes))
            todo = [w for w in writes if w.write_id not in have]
            with st.appender() as append:
                for start in range(0, len(todo), self.chunk):
                    part = decompose(a.backend, todo[start : start + self.chunk])
                    append([d.to_dict() for d in part])
                    have.update((d.write_id, d) for d in part)
                    self.progress("obligations", len(part), len(writes))
            self.decs = [have[w.write_id] for w in writes]
            reuse.forget("obligations")
            st.finish([d.to_dict() for d in self.decs])
        reuse.remember("obligations", set_obl, self.keys)
        return self.cfg.until == "obligations"

    def calibration(self) -> bool:
        """Each annotator's E, R and S thresholds from items of known answer, built from the log
        itself (default), the packaged corpus (scored once per judge) or the user's own file; a run
        keeps its calibration while the judges and the corpus are the same (incremental.py)."""
        cfg, meta, annotators = self.cfg, self.meta, self.annotators
        a, b, adj = annotators
        cal_key = _fp([(x.role, x.wording, x.backend.identity()) for x in annotators], cfg.calibrate,
                      calibrate.corpus_name(cfg.calibrate_on))
        kept = _kept_calibration(meta, cal_key, annotators)
        health: dict[str, Any] = {}
        if kept is not None:
            health, slot_off = kept
            self.notify("calibration kept from this run's earlier scan (same judges, same corpus)")
        elif cfg.calibrate:  # all three roles in one call: roles on one model share each window's prefix
            cal_log = calibrate.corpus(cfg.calibrate_on, self.log)
            # S items role by role, stopping at the first that is moot (calibrate.add_slots)
            cals = calibrate.calibrate_many([(x.backend, x.wording, calibrate.adjudicator_task() if x is adj
                                              else None) for x in (a, b, adj)], cal_log,
                                            with_slots=(True, False, False))
            slot_off = calibrate.add_slots(cals, [(b.backend, b.wording, None),
                                                  (adj.backend, adj.wording, calibrate.adjudicator_task())], cal_log)
            for x, cal in zip((a, b, adj), cals, strict=True):
                x.thresholds = {k: calibrate.usable(t) for k, t in cal["thresholds"].items()}
                health[x.role] = {**cal, "thresholds": {k: t.to_dict() for k, t in cal["thresholds"].items()},
                                  "corpus": calibrate.corpus_name(cfg.calibrate_on),
                                  "warning": calibrate.health_warning(x.role, cal)}
        else:
            slot_off = ("the scan is not calibrated (ScanConfig.calibrate=False): the slot check is only used at "
                        "calibrated thresholds")
        for x in (a, b, adj):
            if slot_off:
                x.thresholds["s"] = math.inf  # never asked (annotate skips an unreachable threshold)
        self.health = meta["calibration"] = health
        meta["calibration_key"] = cal_key
        meta["slot_check"] = "on" if not slot_off else f"off: {slot_off}"
        self.progress("calibration", 1, 1)
        return False

    def primitives(self) -> bool:
        """Both views, two annotators, adjudication."""
        annotators, writes, reuse = self.annotators, self.writes, self.reuse
        settings = ([x.describe() for x in annotators],
                    prompts_fingerprint("der_", "adjudicate", "evidence", "null_"), RULES, SUBSET_RULES)
        set_prim, self.fp_prim = _fp(*settings), _fp(self.fp_obl, *settings)
        st = Stage(self.run, "primitives", self.fp_prim, self.meta)
        self.by_write = by_write = {d.write_id: d for d in self.decs}
        self.view_of = {v.write.write_id: v for v in self.view_list}
        prim_keys = {w: _fp(k, by_write[w].to_dict()) for w, k in self.keys.items()}
        if self.done(st):
            self.prim_rows = st.load()
            self.reused["primitives"] = len(writes)
            self.progress("primitives", len(writes), len(writes))
        else:
            done_rows = st.resumed()
            finished = {r["write_id"] for r in done_rows if r.get("_last")}
            rows = [r for r in done_rows if r["write_id"] in finished]
            old = reuse.usable("primitives", set_prim, prim_keys) - finished
            kept_rows = reuse.rows("primitives", old)  # settled already: the rules work write by write
            self.reused["primitives"] = len(old)
            self.progress("primitives", len(finished) + len(old), len(writes))
            todo = [w for w in writes if w.write_id not in finished and w.write_id not in old]
            rows += self._annotate(st, todo)
            for r in rows:
                r.pop("_last", None)
            rows = settled(rows, *settle_inputs(self.log, writes, self.view_list, self.decs)) + kept_rows
            order = {w.write_id: i for i, w in enumerate(writes)}
            rows.sort(key=lambda r: (order[r["write_id"]], VIEW_NAMES.index(r["view"]), r["obligation_id"]))
            self.prim_rows = rows
            reuse.forget("primitives")
            st.finish(rows)
            if old:
                self.notify(f"{len(old)} of {len(writes)} writes judged by this run's earlier scan, unchanged with "
                            f"their evidence: kept; the other {len(writes) - len(old)} judged now")
        reuse.remember("primitives", set_prim, prim_keys)
        self.meta["reused"] = self.reused
        return self.cfg.until == "primitives"

    def _annotate(self, st: Stage, todo: Sequence[Write]) -> list[dict[str, Any]]:
        """The primitive rows of `todo`, appended to the partial file write by write as judged."""
        out: list[dict[str, Any]] = []
        with st.appender() as append:
            for start in range(0, len(todo), self.chunk):
                part = todo[start : start + self.chunk]
                rows = [_primitive_row(x) for x in run_annotators(self._items(part), *self.annotators)]
                last_of = {r["write_id"]: i for i, r in enumerate(rows)}
                for i in last_of.values():
                    rows[i]["_last"] = True  # marks a write as complete in the partial file
                append(rows)
                out.extend(rows)
                self.progress("primitives", len(part), len(self.writes))
        return out

    def _items(self, writes: Sequence[Write]) -> list[Item]:
        return [Item(o, w, vn, getattr(self.view_of[w.write_id], vn))
                for w in writes for vn in VIEW_NAMES for o in self.by_write[w.write_id].obligations]

    def labels(self) -> dict[str, Any]:
        """Labels, the scope report, the lifecycle stage, and the rubric rerun when asked."""
        cfg, meta, writes, annotators = self.cfg, self.meta, self.writes, self.annotators
        labels = label_writes(writes, self.view_list, self.decs, self.prim_rows)
        Stage(self.run, "labels", _fp(self.fp_prim), meta).finish(labels)
        report = scope_report(labels, self.prim_rows, self.decs)
        report["calibration"] = self.health
        report["slot_check"] = meta["slot_check"]
        report["run"] = {"writes": len(writes), "conversations": len({w.conversation_id for w in writes}),
                         "skipped_records": len(self.log.skipped), "seconds": round(time.time() - self.started, 2),
                         "judged_by": {x.role: f"{x.backend.identity().get('model')} ({x.backend.name})"
                                       for x in annotators}}
        life = _lifecycle(self.log, self.run, annotators, cfg, meta, labels, self.decs, self.fp_prim, self.done,
                          self.progress, self.reuse)
        if life is not None:
            report["lifecycle"] = life
            self.timings["lifecycle"] = meta["timings"].get("lifecycle", 0.0)
        runs.write_json(self.run, runs.SCOPE, report)
        if cfg.rubric:
            from .rubric import rerun

            t0 = time.time()
            report["rubric"] = rerun(self.run, calibrate.corpus(cfg.calibrate_on, self.log), annotators[0],
                                     cfg.rubric, self._items(writes), use_calibration=cfg.calibrate,
                                     progress=self.progress)
            self.timings["rubric"] = round(time.time() - t0, 3)
        meta["usage"] = usage_by_backend(annotators)
        save_meta(self.run, meta)
        return report


def _kept_calibration(meta: dict[str, Any], key: str, annotators: Sequence[Annotator]
                      ) -> tuple[dict[str, Any], str | None] | None:
    """The calibration an earlier scan of this run made with the same judges and corpus, applied to
    `annotators` (health, why the slot check is off); None when there is none to keep."""
    health = meta.get("calibration")
    slot = meta.get("slot_check")
    if meta.get("calibration_key") != key or not isinstance(health, dict) or not isinstance(slot, str) \
            or any(x.role not in health for x in annotators):
        return None
    for x in annotators:
        x.thresholds = {k: calibrate.usable(calibrate.Threshold.from_dict(t))
                        for k, t in health[x.role]["thresholds"].items()}
    return health, None if slot == "on" else slot.removeprefix("off: ")


def _lifecycle(log: MemoryLog, run: Path, annotators: tuple[Annotator, Annotator, Annotator], cfg: ScanConfig,
               meta: dict[str, Any], labels: Sequence[dict[str, Any]],
               decs: Sequence[Decomposition], fp_prim: str, done: Callable[[Stage], bool],
               progress: Progress, reuse: incremental.Reuse) -> dict[str, Any] | None:
    """The lifecycle stage: every deletion, invalidation and update of the selected
    conversations judged against the turns after its target's write; None when the log has none."""
    from ..report.lifecycle import summarize
    from . import lifecycle, lifecycle_calibration

    chosen = {r["write_id"] for r in labels}
    cases = [c for c in lifecycle.cases(log, cfg.conversations) if (cfg.limit is None and cfg.sample is None)
             or (c.target.write_id in chosen and (c.new is None or c.new.write_id in chosen))]
    if not cases:
        return None
    a, b, adj = annotators
    t0 = time.time()
    fp = _fp(fp_prim, [(c.case_id, c.target.write_id, c.point) for c in cases],
             prompts_fingerprint("op_", "adjudicate_op", "der_", "adjudicate"), lifecycle.RULES)
    st = Stage(run, runs.LIFECYCLE.removesuffix(".jsonl"), fp, meta)
    if done(st):
        rows = st.load()
    else:
        asked = ("e", "r") if lifecycle_calibration.asks_forget(log, cases) else ("r",)  # F only where it is asked
        cal_key = _fp(meta.get("calibration_key"), asked)
        kept = meta.get("lifecycle_calibration") if meta.get("lifecycle_calibration_key") == cal_key else None
        if cfg.calibrate and isinstance(kept, dict) and all(x.role in kept for x in annotators):
            for x in annotators:
                x.thresholds.update({k: calibrate.usable(calibrate.Threshold.from_dict(t))
                                     for k, t in kept[x.role]["thresholds"].items()})
        elif cfg.calibrate:
            cal_log = calibrate.corpus(cfg.calibrate_on, log)
            for x, c in zip((a, b, adj), lifecycle_calibration.calibrate([(a, False), (b, False), (adj, True)],
                                                                         cal_log,
                                                             asked=asked), strict=True):
                x.thresholds.update({k: calibrate.usable(t) for k, t in c["thresholds"].items()})
                meta.setdefault("lifecycle_calibration", {})[x.role] = {
                    **c, "thresholds": {k: t.to_dict() for k, t in c["thresholds"].items()}}
            meta["lifecycle_calibration_key"] = cal_key
        obligations = {d.write_id: d.obligations for d in decs}
        missing = list({c.target.write_id: c.target for c in cases if c.target.write_id not in obligations}.values())
        for d in decompose(a.backend, missing) if missing else []:
            obligations[d.write_id] = d.obligations
        write_labels = {r["write_id"]: r["expanded_label"] for r in labels}
        obligation_labels = {o: x for r in labels for o, x in r.get("expanded", {}).get("obligations", {}).items()}
        settings = _fp([x.describe() for x in annotators], prompts_fingerprint("op_", "adjudicate_op", "der_",
                                                                               "adjudicate"), lifecycle.RULES)
        keys = {c.case_id: _case_key(log, c, obligations, write_labels, obligation_labels) for c in cases}
        have = {r["case_id"]: r for r in st.resumed()}
        old = reuse.usable("lifecycle", settings, keys) - set(have)
        have.update((r["case_id"], r) for r in reuse.rows("lifecycle", old, "case_id"))
        progress("lifecycle", len(have), len(cases))
        with st.appender() as append:  # one case per round: a kill loses at most the case in flight
            for c in cases:
                if c.case_id in have:
                    continue
                got = [r.to_dict() for r in lifecycle.judge(log, [c], obligations, a, b, adj, write_labels,
                                                             obligation_labels)]
                append(got)
                have.update((r["case_id"], r) for r in got)
                progress("lifecycle", 1, len(cases))
        rows = [have[c.case_id] for c in cases]
        reuse.forget("lifecycle")
        st.finish(rows)
        reuse.remember("lifecycle", settings, keys)
    meta.setdefault("timings", {})["lifecycle"] = round(time.time() - t0, 3)
    save_meta(run, meta)
    return summarize(rows)


def _case_key(log: MemoryLog, c: Any, obligations: dict[str, Any], write_labels: dict[str, Any],
              obligation_labels: dict[str, Any]) -> str:
    """What the judgement of one lifecycle operation depends on besides settings: the operation, its
    writes, the conversation up to its point, and its target's obligations and labels."""
    conv = log.conversations[c.conversation_id]
    target = c.target.write_id
    obls = [(o.obligation_id, o.text) for o in obligations.get(target, [])]
    return _fp(c.case_id, c.kind, c.point, c.origin, c.time, list(c.citations),
               [incremental.record(w) if w else None for w in (c.target, c.successor, c.new)],
               [incremental.record(t) for t in conv.turns[: conv.position[c.point] + 1]], obls,
               write_labels.get(target), [obligation_labels.get(o) for o, _ in obls])


def usage_by_backend(annotators: Sequence[Annotator]) -> list[dict[str, Any]]:
    """Model work per distinct backend (annotators may share one), for run metadata."""
    out, seen = [], set()
    for x in annotators:
        be = x.backend
        if id(be) in seen:
            continue
        seen.add(id(be))
        out.append({"roles": [y.role for y in annotators if y.backend is be], "model": be.identity().get("model"),
                    **usage_report(be)})
    return out


def settled(prim_rows: Sequence[dict[str, Any]], texts: dict[str, str], when: dict[str, str | None],
            turns: dict[tuple[str, str], conflicts.Passage], *, carry: bool = True,
            values: bool = True) -> list[dict[str, Any]]:
    """The rules after the annotation, in order: value conflicts of each memory and view found by
    arithmetic (conflicts.apply), then every checked refutation carried to each view of its
    obligation that holds its passages (labels.carry_across_views, R only: carrying E as well was
    measured and not kept, see docs/method.md). Same rows,
    same order. `texts`: obligation id -> text; `when`: write id -> the memory's time; `turns`:
    (conversation, turn id) -> passage. `carry` and `values` switch the rules off one by one, to
    measure each (benchmarks/relabel.py)."""
    out = list(prim_rows)

    def per(key: Callable[[dict[str, Any]], Any], rule: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]):
        groups: dict[Any, list[int]] = {}
        for i, r in enumerate(out):
            groups.setdefault(key(r), []).append(i)
        for ix in groups.values():
            for i, r in zip(ix, rule([out[i] for i in ix]), strict=True):
                out[i] = r

    if values:
        per(lambda r: (r["write_id"], r["view"]), lambda rs: conflicts.apply(
            rs, texts, when.get(rs[0]["write_id"]),
            {tid: p for (c, tid), p in turns.items() if c == rs[0]["conversation_id"]}))
    if carry:
        per(lambda r: r["obligation_id"], lambda rs: carry_across_views(rs, which=("r",)))
    return out


def settle_inputs(log: MemoryLog, writes: Sequence[Write], views: Sequence[EvidenceViews],
                  decs: Sequence[Decomposition]):
    """What `settled` reads besides the rows: obligation texts, each memory's time (its own, else
    its write point's), and every passage of its views."""
    texts = {o.obligation_id: o.text for d in decs for o in d.obligations}
    when = {w.write_id: write_time(log, w) for w in writes}
    turns = {(t.conversation_id, t.turn_id): conflicts.Passage(t.turn_id, t.text, t.time)
             for v in views for vn in VIEW_NAMES for t in getattr(v, vn)}
    return texts, when, turns
