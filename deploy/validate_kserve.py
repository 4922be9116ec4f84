"""Validates KServe InferenceService manifests offline.

kubernetes-validate has no schema for KServe's custom resources (it only warns), so this checks
them against deploy/kserve/inferenceservice.schema.json, our own schema of the fields we use,
whose PodSpec parts refer to the strict Kubernetes definitions kubernetes-validate ships.

    python deploy/validate_kserve.py [-k 1.37.0] FILE...

Prints one line per resource, like kubernetes-validate, and exits 1 when one does not validate.
"""

import argparse
import importlib.resources
import json
import pathlib
import sys

import jsonschema
import referencing
import yaml

SCHEMA = pathlib.Path(__file__).parent / "kserve" / "inferenceservice.schema.json"


def kubernetes_definitions(version: str) -> dict:
    """The strict Kubernetes definitions of the given version, as kubernetes-validate ships them."""
    folder = importlib.resources.files("kubernetes_validate") / "kubernetes-json-schema"
    path = folder / f"v{version}-local-strict" / "_definitions.json"
    if not path.is_file():
        known = sorted(p.name for p in folder.iterdir() if p.name.endswith("-local-strict"))
        raise SystemExit(f"Cannot validate: no Kubernetes {version} schemas, known: {', '.join(known)}")
    return json.loads(path.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", "--kubernetes-version", default="1.37.0")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    definitions = kubernetes_definitions(args.kubernetes_version)
    schema = json.loads(SCHEMA.read_text())
    registry = referencing.Registry().with_resource(
        definitions["$id"], referencing.Resource.from_contents(definitions)
    )
    validator = jsonschema.Draft202012Validator(schema, registry=registry)
    failed = 0
    for name in args.files:
        with open(name, encoding="utf-8") as file:
            resources = [doc for doc in yaml.safe_load_all(file) if doc is not None]
        for resource in resources:
            label = f"{str(resource.get('kind', '?')).lower()}/{resource.get('metadata', {}).get('name', '?')}"
            if resource.get("kind") != "InferenceService":
                print(f"WARN {name} {label} is not an InferenceService: not checked here")
                continue
            errors = sorted(validator.iter_errors(resource), key=lambda e: list(e.absolute_path))
            if not errors:
                print(f"INFO {name} passed for resource {label} against KServe v1beta1 "
                      f"(Kubernetes {args.kubernetes_version} definitions)")
            for error in errors:
                failed += 1
                path = ".".join(str(part) for part in error.absolute_path)
                print(f"ERROR {name} did not validate for resource {label}: {path}: {error.message}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
