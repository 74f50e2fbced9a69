export BUILD_DIR=/tmp/b2 CMAKE_ARGS="-DDOCTEST_INCLUDE_DIR=$PWD/gpu_scratch/inc"
bash scripts/test.sh 2>&1 | grep -v "Building\|Linking" | tail -25
bash scripts/demo.sh 2>&1 | tail -3
B=$BUILD_DIR
nvcc -x cu -std=c++20 -O2 -arch=native -DTESSERA_HAS_CUDA=1 -I dsl -I . -c gpu_scratch/gpucheck.cpp -o $B/gpucheck.o && nvcc $B/gpucheck.o $B/libtessera_runtime.a -lcudart -o $B/gpucheck && $B/gpucheck 2>&1 | grep -i "fail\|ok\|peer read"
TESSERA_BACKEND=cuda $B/test_runtime | tail -3
TESSERA_DEBUG_SYNC=1 TESSERA_BACKEND=cuda $B/test_runtime | tail -2
CUDA_VISIBLE_DEVICES=1 TESSERA_BACKEND=cuda $B/test_runtime | tail -2
