"""Optuna's samplers (TPE, GP, CMA-ES, random) driven through ask/tell over a bucket's feasible configs.

Each parameter is a categorical choice among its values. A proposal that is infeasible is told as
failed and a duplicate is told its recorded value, so the sampler learns from both and no config is
measured twice; a sampler that keeps re-proposing is given the untried config nearest its proposal.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kerneltune.files.records import config_key
from kerneltune.seams.protocols import StrategyContext

if TYPE_CHECKING:  # optuna is imported only when a sampler strategy is built
    import optuna

# Rejected asks (known, pending, infeasible) before the untried config nearest the last one is taken. A sampler
# that has converged re-proposes measured configs for hundreds of asks, each a trial that slows the next
# ask; on a replayed landscape 4 asks and the nearest untried config match 500 asks in quality
# (1371b475c129:results/ranker_attention/2026-11-30-h200x2-sweep-c/).
_MAX_REJECTS = 4
_MAX_RANDOM_DRAWS = 10_000


def make_sampler(name: str, seed: int) -> optuna.samplers.BaseSampler:
    import optuna

    match name:
        case "random":
            return optuna.samplers.RandomSampler(seed=seed)
        case "tpe":
            return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True, n_startup_trials=3)
        case "gp":
            return optuna.samplers.GPSampler(seed=seed, n_startup_trials=3)
        case "cmaes":
            return optuna.samplers.CmaEsSampler(seed=seed, n_startup_trials=3, warn_independent_sampling=False)
    raise ValueError(f"strategy: {name!r} has no Optuna sampler")


class OptunaStrategy:
    """Ask/tell over an Optuna study; ``value`` None marks a failed candidate.

    Given the bucket's ``feasible`` configs it draws only among them. Without them (a budgeted search of a
    space too large to enumerate) it asks ``check`` about each proposal instead, so that memory and the
    study's log grow with the proposals made, not with the size of the space."""

    def __init__(self, study: optuna.Study, params: Mapping[str, list[Any]], feasible: list[dict[str, Any]] | None,
                 done: Mapping[str, float | None], seed: int, start: Mapping[str, Any] | None = None,
                 check: Callable[[dict[str, Any]], str | None] | None = None,
                 warm: tuple[dict[str, Any], ...] = ()):
        import optuna

        self._fail = optuna.trial.TrialState.FAIL
        self.study = study
        self.learns = not isinstance(study.sampler, optuna.samplers.RandomSampler)
        self.params = dict(params)
        self.feasible = None if feasible is None else {config_key(c): c for c in feasible}
        self.check = check
        self.known: dict[str, float | None] = dict(done)
        self.pending: dict[str, optuna.trial.Trial] = {}
        self.rng = random.Random(seed)
        # Choices, not ordinals: a tile size or a flag has no useful distance for the samplers'
        # models (TPE with integer indices missed the q128 config at D=64 on a recorded H200 sweep).
        self.dists = {n: optuna.distributions.CategoricalDistribution(list(range(len(v))))
                      for n, v in self.params.items()}
        self._told_known()
        # Start where an engineer would: the kernel's heuristic config, if it is in this space.
        # Then the warm start's configs: the nearest tuned buckets' winners and runner-ups.
        queued: set[str] = set()
        for config in ([dict(start)] if start is not None else []) + [dict(w) for w in warm]:
            key = config_key(config)
            if key not in self.known and key not in queued and self._allowed(config):
                queued.add(key)
                self.study.enqueue_trial({n: self.params[n].index(config[n]) for n in self.params}, skip_if_exists=True)

    def _told_known(self) -> None:
        """Tell the study what the journal holds and the study does not (its log was lost or set aside): the
        sampler learns from every measured config, and the journal is the record."""
        import optuna

        told = {config_key(self._config(t)) for t in self.study.get_trials(deepcopy=False)
                if t.state.is_finished() and set(t.params) == set(self.params)}
        untold = []
        for key, value in self.known.items():
            config = json.loads(key)
            if key in told or set(config) != set(self.params) or any(
                    config[n] not in v for n, v in self.params.items()):
                continue
            params = {n: self.params[n].index(config[n]) for n in self.params}
            state = optuna.trial.TrialState.FAIL if value is None else optuna.trial.TrialState.COMPLETE
            untold.append(optuna.trial.create_trial(params=params, distributions=self.dists, value=value, state=state))
        self.study.add_trials(untold)

    def _allowed(self, config: dict[str, Any]) -> bool:
        if self.feasible is not None:
            return config_key(config) in self.feasible
        return all(config.get(n) in v for n, v in self.params.items()) and self.check is not None and \
            self.check(config) is None

    def _config(self, trial: optuna.trial.Trial) -> dict[str, Any]:
        return {n: self.params[n][trial.params[n]] for n in self.params}

    def _untried(self) -> list[str]:
        assert self.feasible is not None
        return [k for k in self.feasible if k not in self.known and k not in self.pending]

    def propose(self) -> dict[str, Any] | None:
        if self.feasible is not None and not self._untried():
            return None
        config: dict[str, Any] = {}
        for _ in range(_MAX_REJECTS):
            trial = self.study.ask(self.dists)
            config = self._config(trial)
            key = config_key(config)
            if key in self.known and self.known[key] is not None:
                self.study.tell(trial, self.known[key])  # a duplicate: its recorded value, no new measurement
            elif key in self.known or key in self.pending or not self._allowed(config):
                self.known.setdefault(key, None)
                self.study.tell(trial, state=self._fail)
            else:
                self.pending[key] = trial
                return config
        # The sampler keeps proposing what is known: take the untried config nearest its last proposal.
        config = self._nearest_untried(config)
        if config is None:
            return None
        self.study.enqueue_trial({n: self.params[n].index(config[n]) for n in self.params})
        trial = self.study.ask(self.dists)
        self.pending[config_key(config)] = trial
        return config

    def _nearest_untried(self, near: dict[str, Any]) -> dict[str, Any] | None:
        """An untried config differing from ``near`` in the fewest parameters (ties at random): the
        sampler's last proposal still says where it looks. Without a feasible list, one at random."""
        if self.feasible is not None:
            untried = self._untried()
            if not untried:
                return None
            feasible = self.feasible
            distance = {k: sum(feasible[k][n] != v for n, v in near.items()) for k in untried}
            closest = min(distance.values())
            return feasible[self.rng.choice([k for k in untried if distance[k] == closest])]
        for _ in range(_MAX_RANDOM_DRAWS):
            config = {n: self.rng.choice(v) for n, v in self.params.items()}
            key = config_key(config)
            if key not in self.known and key not in self.pending and self._allowed(config):
                return config
        return None

    def observe(self, config: Mapping[str, Any], value: float | None) -> None:
        key = config_key(config)
        self.known[key] = value
        trial = self.pending.pop(key, None)
        if trial is None:
            return
        if value is None:
            self.study.tell(trial, state=self._fail)
        else:
            self.study.tell(trial, value)


def sampled(name: str, ctx: StrategyContext) -> OptunaStrategy:
    """The strategy of Optuna's sampler ``name`` over the context's study (a resumed sweep continues it)."""
    import optuna

    study = optuna.create_study(study_name=ctx.study_name, storage=ctx.storage(),
                                sampler=make_sampler(name, ctx.seed), direction="minimize", load_if_exists=True)
    return OptunaStrategy(study, ctx.params, ctx.feasible, ctx.known, ctx.seed, ctx.start, ctx.check, ctx.warm)


STRATEGIES = {name: functools.partial(sampled, name) for name in ("random", "tpe", "gp", "cmaes")}
