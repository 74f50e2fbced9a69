set -x
nvidia-smi -L; cmake --version | head -1; nvcc --version | tail -2; nvidia-smi topo -m
ls /usr/include/doctest 2>&1
B=/tmp/build
cmake -S . -B $B -G Ninja -DCMAKE_BUILD_TYPE=Release -DDOCTEST_INCLUDE_DIR=$PWD/gpu_scratch/inc 2>&1 | tail -5
cmake --build $B -j 16 2>&1 | tail -5
nvcc -std=c++20 -O2 -arch=native -DTESSERA_HAS_CUDA=1 -I dsl -I . gpu_scratch/gpucheck.cpp $B/libtessera_runtime.a -lcudart -o $B/gpucheck
$B/gpucheck 2>&1 | tee $OUT/gpucheck.txt
(cd $B && ctest --output-on-failure -j 16 2>&1 | tail -12)
TESSERA_BACKEND=cuda $B/test_runtime -s 2>&1 | grep -v "SUCCESS\|values:\|^$\|^  CHECK\|^=====\|^/work\|CAPTURE\|^  " | tail -60 > $OUT/test_cuda.txt; tail -5 $OUT/test_cuda.txt
TESSERA_BACKEND=cuda $B/test_runtime 2>&1 | tail -4
TESSERA_DEBUG_SYNC=1 TESSERA_BACKEND=cuda $B/test_runtime 2>&1 | tail -2
CUDA_VISIBLE_DEVICES= TESSERA_BACKEND=cuda $B/test_runtime 2>&1 | tail -2
CUDA_VISIBLE_DEVICES= $B/test_runtime 2>&1 | tail -2
CUDA_VISIBLE_DEVICES=1 $B/gpucheck 2>&1 | tail -3
