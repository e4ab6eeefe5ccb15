# kache_reapi_found(OUT_VAR): whether what cmake/reapi.cmake requires is installed (protoc, grpc_cpp_plugin,
# grpc++ and protobuf for pkg-config, the REAPI .proto files), so that KACHE_REMOTE_EXEC=AUTO can leave
# kache-reapi out instead of failing.
set(KACHE_REAPI_PROTO_ROOT /usr/src/bazel-bootstrap/third_party CACHE PATH
  "bazel-bootstrap-source's third_party folder, holding remoteapis/ and googleapis/")

function(kache_reapi_found out_var)
  find_program(PROTOC protoc)
  find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin)
  pkg_check_modules(KACHE_GRPC_PROBE QUIET grpc++ protobuf)
  if(PROTOC AND GRPC_CPP_PLUGIN AND KACHE_GRPC_PROBE_FOUND
      AND EXISTS ${KACHE_REAPI_PROTO_ROOT}/remoteapis/build/bazel/remote/execution/v2/remote_execution.proto)
    set(${out_var} ON PARENT_SCOPE)
  else()
    set(${out_var} OFF PARENT_SCOPE)
  endif()
endfunction()
