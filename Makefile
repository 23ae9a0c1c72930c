# The two commands of README.md. Both work from a fresh clone on Debian 12.
.PHONY: demo test build clean

demo:
	scripts/demo.sh

test:
	scripts/test.sh

build:
	scripts/setup.sh
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build -j

clean:
	rm -rf build build-asan build-fuzz out
