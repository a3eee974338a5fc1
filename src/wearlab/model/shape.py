"""Link shaping for one direction: the YAML fields (`ShapeSpec`) and the resolved numbers (`Shape`).

The same fields appear in three layers - a profile, a link, and a link's `forward`/`reverse` - and
`ShapeSpec.over(shape)` applies one layer on top of a resolved Shape. Only keys the user actually
wrote override (pydantic's `model_fields_set`), so an omitted key never resets a profile value.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from wearlab.model import quantities, unit_input


def _unit(parser):
    """A BeforeValidator that parses a unit string; None means 'not given' and passes through."""
    return BeforeValidator(lambda v: None if v is None else parser(v))


# ---------------------------------------------------------------------------------------------
# Resolved (what realize/measure consume): SI numbers, percents as 0..100.


class Loss(BaseModel):
    """Packet loss for one direction. Percentages (0..100), as netem takes them.

    random: each packet lost with probability p. gilbert-elliott: netem `gemodel p r 1-h 1-k`,
    i.e. p = P(good->bad), r = P(bad->good), bad_loss = 1-h, good_loss = 1-k.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: Literal["random", "gilbert-elliott"] = "random"
    p: float
    r: float | None = None
    bad_loss: float | None = None
    good_loss: float | None = None


class Shape(BaseModel):
    """Fully resolved shaping for one direction of a link."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_bps: int | None = None
    delay_s: float = 0.0  # one-way
    jitter_s: float = 0.0
    reorder: bool = False  # with jitter, keep packet order unless this is true
    loss: Loss | None = None
    queue_packets: int | None = None
    queue_bytes: int | None = None

    def needs_netem(self) -> bool:
        """True when anything beyond a plain rate limit is asked for (netem does those)."""
        return bool(self.delay_s or self.jitter_s or self.loss is not None
                    or self.queue_packets is not None or self.queue_bytes is not None)

    def to_document(self) -> dict[str, Any]:
        """Human-readable form, using the YAML keys so it can be fed back in as `forward:`."""
        doc: dict[str, Any] = {}
        if self.rate_bps is not None:
            doc["rate"] = quantities.format_rate(self.rate_bps)
        doc["delay"] = quantities.format_duration(self.delay_s)
        doc["jitter"] = quantities.format_duration(self.jitter_s)
        doc["reorder"] = self.reorder
        if self.loss is not None:
            if self.loss.model == "random":
                doc["loss"] = quantities.format_percent(self.loss.p)
            else:
                doc["loss"] = {"model": self.loss.model,
                               **{k: quantities.format_percent(v) for k, v in self.loss.model_dump().items()
                                  if k != "model" and v is not None}}
        if self.queue_packets is not None:
            doc["queue_packets"] = self.queue_packets
        if self.queue_bytes is not None:
            doc["queue_bytes"] = quantities.format_size(self.queue_bytes)
        return doc


# ---------------------------------------------------------------------------------------------
# YAML-facing. Field names are the YAML keys (so unknown keys get "did you mean" against them);
# values are parsed to numbers during validation.

Percent = Annotated[float | None, _unit(unit_input.parse_percent)]


class LossSpec(BaseModel):
    """The mapping form of `loss:`; the string form ('1%') is turned into one of these."""

    model_config = ConfigDict(extra="forbid")

    model: Literal["random", "gilbert-elliott"] = "random"
    p: Percent = None
    r: Percent = None
    bad_loss: Percent = None
    good_loss: Percent = None

    @model_validator(mode="after")
    def _consistent(self) -> LossSpec:
        if self.p is None:
            raise ValueError("loss needs p (e.g. 'p: 1%')")
        extra = [k for k in ("r", "bad_loss", "good_loss") if getattr(self, k) is not None]
        if self.model == "random" and extra:
            raise ValueError(f"{', '.join(extra)} only apply to model: gilbert-elliott")
        if self.model == "gilbert-elliott" and self.r is None:
            raise ValueError("gilbert-elliott needs r, the chance per packet of leaving the bad state "
                             "(e.g. 'r: 25%')")
        return self

    def resolve(self) -> Loss:
        if self.model == "random":
            return Loss(model="random", p=self.p)
        # netem's own defaults for gemodel: every packet lost in the bad state, none in the good.
        return Loss(model="gilbert-elliott", p=self.p, r=self.r,
                    bad_loss=100.0 if self.bad_loss is None else self.bad_loss,
                    good_loss=0.0 if self.good_loss is None else self.good_loss)


class ShapeSpec(BaseModel):
    """Shaping keys as written in YAML, for one layer (profile, link, or one direction)."""

    model_config = ConfigDict(extra="forbid")

    rate: Annotated[int | None, _unit(unit_input.parse_rate)] = None
    delay: Annotated[float | None, _unit(unit_input.parse_duration)] = None
    jitter: Annotated[float | None, _unit(unit_input.parse_duration)] = None
    reorder: bool | None = None
    loss: LossSpec | None = None
    queue_packets: Annotated[int | None, Field(gt=0, strict=True)] = None
    queue_bytes: Annotated[int | None, _unit(unit_input.parse_size), Field(gt=0)] = None

    @field_validator("loss", mode="before")
    @classmethod
    def _loss_string(cls, v: Any) -> Any:
        # 'loss: 1%' is shorthand for random loss; anything else must be the mapping form.
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            # Already parsed, so build without re-running the (string-only) percent validator.
            return LossSpec.model_construct(model="random", p=unit_input.parse_percent(v))
        return v

    @model_validator(mode="after")
    def _one_queue(self) -> ShapeSpec:
        if self.queue_packets is not None and self.queue_bytes is not None:
            raise ValueError("queue_packets and queue_bytes are mutually exclusive; set one of them")
        return self

    def over(self, base: Shape) -> Shape:
        """`base` with every key written in this layer replacing the base's value."""
        given = self.model_fields_set
        values = base.model_dump()
        if "rate" in given and self.rate is not None:
            values["rate_bps"] = self.rate
        if "delay" in given and self.delay is not None:
            values["delay_s"] = self.delay
        if "jitter" in given and self.jitter is not None:
            values["jitter_s"] = self.jitter
        if "reorder" in given and self.reorder is not None:
            values["reorder"] = self.reorder
        if "loss" in given and self.loss is not None:
            values["loss"] = self.loss.resolve()
        # The queue is one setting with two possible units: giving either replaces both.
        if self.queue_packets is not None:
            values["queue_packets"], values["queue_bytes"] = self.queue_packets, None
        if self.queue_bytes is not None:
            values["queue_packets"], values["queue_bytes"] = None, self.queue_bytes
        return Shape.model_validate(values)

    def written(self) -> set[str]:
        """YAML keys this layer sets (for locating problems such as jitter > delay)."""
        return {k for k in self.model_fields_set if getattr(self, k) is not None}
