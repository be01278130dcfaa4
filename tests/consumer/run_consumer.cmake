# Builds and runs a 5-line consumer of pipesched, either after `cmake --install` into a
# temporary prefix (MODE=find_package) or through add_subdirectory (MODE=add_subdirectory).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/app)
file(WRITE ${WORK}/app/main.cpp [=[
#include <pipesched/pipesched.hpp>
#include <cstdio>
int main() {
  auto s = pipesched::generate(pipesched::zb_h1{}, 4, 8);
  std::printf("consumer ok: %s %s\n", s.name().c_str(), pipesched::validate(s).ok() ? "valid" : "INVALID");
}
]=])
if(MODE STREQUAL "find_package")
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/lib -DCMAKE_CXX_COMPILER=${CXX}
                          -DPIPESCHED_BUILD_TESTS=OFF -DPIPESCHED_BUILD_EXAMPLES=OFF
                          -DPIPESCHED_BUILD_BENCH=OFF -DPIPESCHED_INSTALL=ON
                          -DCMAKE_INSTALL_PREFIX=${WORK}/prefix COMMAND_ERROR_IS_FATAL ANY)
  execute_process(COMMAND ${CMAKE_COMMAND} --install ${WORK}/lib COMMAND_ERROR_IS_FATAL ANY)
  file(WRITE ${WORK}/app/CMakeLists.txt [=[
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
find_package(pipesched 0.1 REQUIRED)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE pipesched::pipesched)
]=])
  set(extra -DCMAKE_PREFIX_PATH=${WORK}/prefix)
else()
  file(WRITE ${WORK}/app/CMakeLists.txt "cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES CXX)
add_subdirectory(\"${SOURCE}\" pipesched)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE pipesched::pipesched)
")
  set(extra "")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK}/app -B ${WORK}/app/build -DCMAKE_CXX_COMPILER=${CXX} ${extra}
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/app/build COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${WORK}/app/build/app COMMAND_ERROR_IS_FATAL ANY)
