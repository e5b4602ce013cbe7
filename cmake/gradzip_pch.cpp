// Translation unit that carries gradzip's shared precompiled header (cmake/gradzip_pch.h).
