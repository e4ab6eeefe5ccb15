"""A raw REAPI client for tests, run by BuildGrid's own Python (servers.BUILDGRID_VENV, which has grpc and
the REAPI messages): it plays the server's *other* clients, who may send any input root and write the
ActionCache. One JSON request on stdin, one JSON answer on stdout.

  {"op": "execute", "url", "instance", "argv", "env": {}, "platform": {}, "outputs": [], "root": DIR}
      DIR is {"files": [[name, text, executable]], "dirs": [[name, DIR]]}, serialized as given (any names,
      duplicates included); a file given as [name, text, executable, size] claims another size.
      Answer: {"code", "message", "exit_code", "stdout", "outputs": {path: text}}.
  {"op": "plant", "url", "instance", "action": "hash/size", "outputs": {path: text}}
      Replaces the ActionCache's result of the action by one whose outputs are the given texts.
"""
import json
import sys

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2 as re
from buildgrid._protos.build.bazel.remote.execution.v2 import remote_execution_pb2_grpc as re_grpc
import hashlib


def digest(data):
    return re.Digest(hash=hashlib.sha256(data).hexdigest(), size_bytes=len(data))


class Uploads:
    def __init__(self):
        self.blobs = {}

    def add(self, data):
        d = digest(data)
        self.blobs[d.hash] = data
        return d

    def directory(self, spec):
        msg = re.Directory()
        for entry in spec.get("files", []):
            name, text, executable = entry[:3]
            d = self.add(text.encode())
            if len(entry) > 3:
                d.size_bytes = entry[3]
            msg.files.add(name=name, digest=d, is_executable=executable)
        for name, sub in spec.get("dirs", []):
            msg.directories.add(name=name, digest=self.directory(sub))
        return self.add(msg.SerializeToString())

    def send(self, channel, instance):
        cas = re_grpc.ContentAddressableStorageStub(channel)
        req = re.BatchUpdateBlobsRequest(instance_name=instance)
        for h, data in self.blobs.items():
            req.requests.add(digest=re.Digest(hash=h, size_bytes=len(data)), data=data)
        cas.BatchUpdateBlobs(req, timeout=60)


def execute(channel, r):
    up = Uploads()
    platform = re.Platform()
    for k, v in sorted(r.get("platform", {}).items()):
        platform.properties.add(name=k, value=v)
    cmd = re.Command(arguments=r["argv"], output_files=sorted(r.get("outputs", [])), platform=platform)
    for k, v in sorted(r.get("env", {}).items()):
        cmd.environment_variables.add(name=k, value=v)
    action = re.Action(command_digest=up.add(cmd.SerializeToString()), input_root_digest=up.directory(r["root"]),
                       do_not_cache=True, platform=platform)
    action_digest = up.add(action.SerializeToString())
    up.send(channel, r.get("instance", ""))
    req = re.ExecuteRequest(instance_name=r.get("instance", ""), action_digest=action_digest, skip_cache_lookup=True)
    op = None
    for op in re_grpc.ExecutionStub(channel).Execute(req, timeout=300):
        if op.done:
            break
    answer = {"code": op.error.code, "message": op.error.message, "exit_code": None, "stdout": "", "outputs": {}}
    if op.HasField("error"):
        return answer
    resp = re.ExecuteResponse()
    op.response.Unpack(resp)
    out = resp.result.stdout_raw
    if not out and resp.result.stdout_digest.size_bytes:
        read = re.BatchReadBlobsRequest(instance_name=r.get("instance", ""), digests=[resp.result.stdout_digest])
        out = re_grpc.ContentAddressableStorageStub(channel).BatchReadBlobs(read, timeout=60).responses[0].data
    answer.update(code=resp.status.code, message=resp.status.message, exit_code=resp.result.exit_code,
                  stdout=out.decode(errors="replace"))
    return answer


def plant(channel, r):
    up = Uploads()
    result = re.ActionResult(exit_code=0)
    for path, text in r["outputs"].items():
        result.output_files.add(path=path, digest=up.add(text.encode()))
    up.send(channel, r.get("instance", ""))
    h, size = r["action"].split("/")
    req = re.UpdateActionResultRequest(instance_name=r.get("instance", ""),
                                       action_digest=re.Digest(hash=h, size_bytes=int(size)), action_result=result)
    re_grpc.ActionCacheStub(channel).UpdateActionResult(req, timeout=60)
    return {"planted": True}


def main():
    r = json.load(sys.stdin)
    with grpc.insecure_channel(r["url"].removeprefix("grpc://")) as channel:
        answer = {"execute": execute, "plant": plant}[r["op"]](channel, r)
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
