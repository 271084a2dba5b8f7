"""What an attempt cost, from litellm's bundled price map (offline: LITELLM_LOCAL_MODEL_COST_MAP).

Why a module: the price map knows public model names only; a local or unknown model has no
price, and that is shown as "no price" rather than as a cost of 0.
"""

from __future__ import annotations


def cost_usd(model: str, tokens_in: int, tokens_out: int) -> float | None:
    """US dollars for the tokens, or None when litellm's price map does not know the model."""
    from chat.llm import load_litellm

    litellm = load_litellm()
    try:
        prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=tokens_in, completion_tokens=tokens_out)
    except Exception:  # noqa: BLE001 - litellm raises its own errors (and plain ones) for unmapped models
        return None
    return float(prompt) + float(completion)
