"""The official OpenAI Python client, unchanged, against a DenoTriton server.

    python openai_client.py <base_url> <chat_model> <embedding_model> [max_tokens]

Prints one JSON object of what each call returned, for tests/openai_test.ts and
tests/openai_smollm2_test.ts to check.
"""

import json
import sys

import openai

base_url, chat_model, embedding_model = sys.argv[1:4]
max_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 16
client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, timeout=120)
out = {"version": openai.__version__}

out["models"] = sorted(model.id for model in client.models.list())

answer = client.chat.completions.create(
    model=chat_model,
    messages=[
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "What is the capital of France?"},
    ],
    max_tokens=max_tokens,
    temperature=0,
)
out["chat"] = {
    "content": answer.choices[0].message.content,
    "role": answer.choices[0].message.role,
    "finish_reason": answer.choices[0].finish_reason,
    "usage": answer.usage.model_dump(),
}

chunks = list(
    client.chat.completions.create(
        model=chat_model,
        messages=[{"role": "user", "content": "What is the capital of France?"}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
)
out["stream"] = {
    "content": "".join(c.choices[0].delta.content or "" for c in chunks if c.choices),
    "roles": [c.choices[0].delta.role for c in chunks if c.choices and c.choices[0].delta.role],
    "finish_reasons": [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason],
    "usage": [c.usage.model_dump() for c in chunks if c.usage is not None],
    "chunks": len(chunks),
}

completion = client.completions.create(
    model=chat_model, prompt="Once upon a time", max_tokens=max_tokens, temperature=0
)
out["completion"] = {
    "text": completion.choices[0].text,
    "finish_reason": completion.choices[0].finish_reason,
    "usage": completion.usage.model_dump(),
}

embeddings = client.embeddings.create(model=embedding_model, input=["a cat", "banana"])
out["embeddings"] = {
    "vectors": [list(item.embedding) for item in embeddings.data],
    "usage": embeddings.usage.model_dump(),
}

try:
    client.chat.completions.create(
        model="NoSuchModel", messages=[{"role": "user", "content": "Hi"}]
    )
    out["error"] = None
except openai.NotFoundError as error:
    out["error"] = {"status": error.status_code, "code": error.code, "type": type(error).__name__}

print(json.dumps(out))
