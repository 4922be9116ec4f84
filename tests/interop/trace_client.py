"""The trace extension with NVIDIA's official Python client (HTTP or gRPC).

Driven by tests/trace_test.ts, which serves the model `Id` with tracing off. Reads the global
settings, turns tracing on (file, level, rate), changes and clears one setting of the model,
and checks that bad settings are refused with a message naming the setting. Prints one
"ok <check>" line per passed check and exits non-zero with the failing check's message
otherwise.
"""

import argparse
import os
import sys

from tritonclient.utils import InferenceServerException


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def expect_error(run, text):
    try:
        run()
    except InferenceServerException as error:
        check(text in error.message(), f"expected {text!r} in {error.message()!r}")
        return
    raise AssertionError(f"expected an error with {text!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--protocol", choices=["http", "grpc"], required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    if args.protocol == "http":
        import tritonclient.http as client_module

        client = client_module.InferenceServerClient(args.url)

        def settings(answer):
            return {k: v if isinstance(v, list) else [v] for k, v in answer.items()}

        def get(model=None):
            return settings(client.get_trace_settings(model_name=model))

        def update(values, model=None):
            return settings(client.update_trace_settings(model_name=model, settings=values))
    else:
        import tritonclient.grpc as client_module

        client = client_module.InferenceServerClient(args.url)

        def settings(answer):
            return {k: v.get("value", []) for k, v in answer["settings"].items()}

        def get(model=None):
            return settings(client.get_trace_settings(model_name=model, as_json=True))

        def update(values, model=None):
            return settings(
                client.update_trace_settings(model_name=model, settings=values, as_json=True)
            )

    start = get()
    check(start["trace_level"] == ["OFF"], f"start level {start}")
    check(start["trace_rate"] == ["1000"] and start["trace_count"] == ["-1"], f"start {start}")
    check(start["trace_mode"] == ["triton"], f"start mode {start}")
    print("ok defaults")

    trace_file = os.path.join(args.dir, f"{args.protocol}.json")
    on = update(
        {
            "trace_file": trace_file,
            "trace_level": ["TIMESTAMPS", "TENSORS"],
            "trace_rate": "2",
            "trace_count": "10",
            "log_frequency": "5",
        }
    )
    check(on["trace_level"] == ["TIMESTAMPS", "TENSORS"], f"level {on}")
    check(on["trace_rate"] == ["2"] and on["trace_count"] == ["10"], f"rate, count {on}")
    check(on["log_frequency"] == ["5"] and on["trace_file"] == [trace_file], f"file {on}")
    check(get() == on, f"read back {get()} != {on}")
    print("ok update global")

    model = update({"trace_rate": "7"}, model="Id")
    check(model["trace_rate"] == ["7"] and model["trace_level"] == ["TIMESTAMPS", "TENSORS"],
          f"model {model}")
    check(get()["trace_rate"] == ["2"], f"global after model {get()}")
    cleared = update({"trace_rate": None}, model="Id")
    check(cleared["trace_rate"] == ["2"], f"cleared {cleared}")
    print("ok model setting")

    expect_error(lambda: update({"trace_rate": "0"}), "trace_rate")
    expect_error(lambda: update({"trace_level": ["ALL"]}), "trace_level")
    expect_error(
        lambda: update({"trace_file": os.path.join(args.dir, "missing", "t.json")}), "trace_file"
    )
    expect_error(lambda: update({"trace_count": "-2"}), "trace_count")
    expect_error(lambda: get(model="NoSuchModel"), "NoSuchModel")
    check(get() == on, f"unchanged after refusals {get()}")
    print("ok refusals")

    off = update({"trace_level": ["OFF"]})
    check(off["trace_level"] == ["OFF"], f"off {off}")
    print("ok off")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as error:
        print(f"FAIL {error}")
        sys.exit(1)
