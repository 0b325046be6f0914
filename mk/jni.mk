# The JNI bridge and the Java class (org.kazetts.KazeTts) build with libkazetts whenever CMake
# finds a JDK; tests/test_java.py runs them on the JVM. `make test` installs Debian's headless
# JDK first when javac is missing, so CI runs the Java tests instead of skipping them.
.PHONY: jdk

jdk:
	@command -v javac >/dev/null || { \
		echo "installing openjdk-17-jdk-headless (the Java tests need a JDK)"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq openjdk-17-jdk-headless >/dev/null; }
