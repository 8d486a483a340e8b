/* A radix-2 complex FFT over a signal, forward then inverse, as MiBench's FFT does:
 * the "FFT" program whose memory trace hscm's report uses. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void fft(double *re, double *im, unsigned n, int inverse) {
    for (unsigned i = 1, j = 0; i < n; i++) {
        unsigned bit = n >> 1;
        for (; j & bit; bit >>= 1) j ^= bit;
        j ^= bit;
        if (i < j) {
            double t = re[i]; re[i] = re[j]; re[j] = t;
            t = im[i]; im[i] = im[j]; im[j] = t;
        }
    }
    for (unsigned len = 2; len <= n; len <<= 1) {
        double ang = 2 * M_PI / len * (inverse ? 1 : -1);
        double wr = cos(ang), wi = sin(ang);
        for (unsigned i = 0; i < n; i += len) {
            double cr = 1, ci = 0;
            for (unsigned k = 0; k < len / 2; k++) {
                unsigned a = i + k, b = i + k + len / 2;
                double xr = re[b] * cr - im[b] * ci, xi = re[b] * ci + im[b] * cr;
                re[b] = re[a] - xr; im[b] = im[a] - xi;
                re[a] += xr; im[a] += xi;
                double t = cr * wr - ci * wi; ci = cr * wi + ci * wr; cr = t;
            }
        }
    }
    if (inverse)
        for (unsigned i = 0; i < n; i++) { re[i] /= n; im[i] /= n; }
}

int main(int argc, char **argv) {
    unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : (1u << 18);
    double *re = malloc(n * sizeof *re), *im = malloc(n * sizeof *im);
    if (!re || !im) return 1;
    srand(7);
    for (unsigned i = 0; i < n; i++) {
        re[i] = sin(i * 0.01) + (rand() % 1000) / 1000.0;
        im[i] = 0;
    }
    fft(re, im, n, 0);
    fft(re, im, n, 1);
    double sum = 0;
    for (unsigned i = 0; i < n; i++) sum += re[i];
    printf("%f\n", sum);
    return 0;
}
