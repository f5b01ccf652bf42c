"""Images in a chat session: attaching them, keeping them, and showing them to the model.

ChatSession (chat.py) calls these few functions; everything image-specific lives here.
An image is stored once by its hash in the chat store's images folder; the model sees
every image of the messages still in its window, through the projector (vision.py).
"""

from __future__ import annotations

from rooflight.errors import BadInputError
from rooflight.runtime.images import ImageData, check_image


def no_projector_sentence(engine) -> str:
    return (f"{engine.model_name} has no vision projector loaded, so it cannot see images; "
            "download the model's mmproj file beside it (or give --mmproj FILE) and load it again.")


def check_can_see(engine) -> None:
    if engine.vision is None:
        raise BadInputError(no_projector_sentence(engine))


def attach(session, msg, images: list[ImageData]) -> None:
    """Keep the images with the message: in memory, and in the store when there is one."""
    msg.images = list(images)
    if session.store is not None and msg.id is not None:
        for img in images:
            session.store.attach_image(msg.id, img.data, img.format, img.width, img.height, img.name)


def stored_images(store, message) -> list[ImageData]:
    """A stored message's images, read back and checked (a damaged file is skipped)."""
    out = []
    for im in getattr(message, "images", ()):
        try:
            out.append(check_image(store.image_bytes(im), im.name or im.path.name))
        except Exception:  # noqa: BLE001 - a lost image must not lose the chat
            continue
    return out


def vision_prompt_for(session, notices: list[str]):
    """The tokenized prompt with images when the messages in view have any, else None.

    Without a projector the images stay in the chat but the model is told nothing of them,
    and the reply says so once.
    """
    start = session._first_kept
    images = [img for m in session.messages[start:] for img in m.images]
    if not images:
        return None
    engine = session.engine
    if engine.vision is None:
        notices.append(no_projector_sentence(engine) + " The images of this chat were left out.")
        return None
    text = engine.format.render(session._conversation(start))
    prompt = engine.vision.tokenize(text, images)
    reserve = min(session.sampling.max_tokens, engine.n_ctx // 2)
    if prompt.n_tokens + reserve > engine.n_ctx:
        n = prompt.n_tokens
        prompt.close()
        raise BadInputError(
            f"With its {len(images)} image(s) the prompt takes {n} tokens, more than the {engine.n_ctx}-token "
            f"context holds with room for a {reserve}-token reply; load the model with a longer context.")
    return prompt


def images_first_token_s(engine, prefill_estimate, n_images: int) -> float:
    """The predicted time to first token of a turn whose prefill (already counting the image
    tokens) also encodes n_images images: the plan's figure has one image in it (encode and
    its tokens); replace that with this turn's encodes."""
    from rooflight.estimate.perf import image_first_token_s
    from rooflight.estimate.vision import vision_for_plan

    lp = engine.plan
    probe = lp.calibration.probe_for(lp.config)
    one = image_first_token_s(lp.spec, lp.hardware, lp.config, prefill_estimate.prefill_tok_s, probe)
    encode = vision_for_plan(lp.spec.projector, lp.hardware, lp.config, probe).encode_s
    return max(0.0, prefill_estimate.time_to_first_token_s - one) + n_images * encode
