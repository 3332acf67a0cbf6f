# gptc_add_proto(<target> <path under include/>)
# Compiles include/<path>.proto with protoc into the build tree
# (<build>/include/<path>.pb.{h,cc}) as a static library <target>.
function(gptc_add_proto target path)
  get_filename_component(dir ${path} DIRECTORY)
  set(out ${PROJECT_BINARY_DIR}/include/${path})
  add_custom_command(
    OUTPUT ${out}.pb.h ${out}.pb.cc
    COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/include/${dir}
    COMMAND protobuf::protoc --cpp_out=${PROJECT_BINARY_DIR}/include
            -I${PROJECT_SOURCE_DIR}/include
            ${PROJECT_SOURCE_DIR}/include/${path}.proto
    DEPENDS ${PROJECT_SOURCE_DIR}/include/${path}.proto
    COMMENT "Compiling ${path}.proto")
  add_library(${target} STATIC ${out}.pb.cc)
  target_include_directories(${target} PUBLIC
    ${PROJECT_BINARY_DIR}/include ${Protobuf_INCLUDE_DIRS})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # Generated code is not ours to warn about.
  target_compile_options(${target} PRIVATE -w)
endfunction()
