#pragma once
#define HANPU_VERSION "0.1.0"
